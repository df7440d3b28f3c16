"""Every test that checks an absence first shows what the code did (issue 46): a test whose
only asserts are absences (`not in`, `is None`, `== []`, `not x`), alone or beside an exit
code, passes when the command failed for an unrelated reason (three did: they exited 3 on
an unknown key and "proved" that aliases expand). The scan reads the tests' source."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

# Tests whose absence is the answer of the function under test (it declines, finds no
# problem, returns nothing), each beside tests of the positive answer in its file; or whose
# positive checks sit in a helper or inside one assert's condition.
ABSENCE_IS_THE_ANSWER = {
    "cli/test_import_budget.py::test_a_replayed_project_command_imports_nothing_of_the_planner": (
        "_imported asserts exit 0"
    ),
    "cli/test_signals_every_phase.py::"
    "test_a_signal_in_each_long_phase_ends_fdl_with_nothing_left_running": (
        "phase.ready() (the long phase reached) and the signal's exit code come first"
    ),
    "unit/test_amd_smi.py::test_no_gpu_in_kfd_asks_no_tool": (
        "no GPU: asking nothing is the answer; the file's other tests read the tools"
    ),
    "unit/test_gfx_names.py::test_hostile_names_are_not_targets": (
        "None is refusing; test_valid_target_ids shows the names that parse"
    ),
    "unit/test_mutation_kills_manifest.py::test_the_final_tree_holds_no_merge_tags": (
        "the merged values are the file's other tests; this one is the tags' absence"
    ),
    "unit/test_mutation_kills_manifest.py::test_a_deleted_root_materializes_to_nothing": (
        "None is what a deleted root gives"
    ),
    "unit/test_mutation_kills_select.py::test_a_rocm_build_with_no_known_glibc_floor_never_warns": (
        "no warning is the answer; the glibc warning is tested beside it"
    ),
    "unit/test_mutation_kills_select.py::test_only_ptx_is_still_code": (
        "the second assert is the positive: compute_90 PTX does not run sm_86"
    ),
    "unit/test_mutation_kills_select.py::"
    "test_nothing_to_say_without_a_cuda_build_gpus_or_known_code": (
        "None is 'nothing missed'; the misses are the file's other coverage tests"
    ),
    "unit/test_mutation_kills_select.py::"
    "test_cubins_need_only_the_minor_version_floor_of_the_driver": (
        "no warning is the answer; the driver warnings are tested beside it"
    ),
    "unit/test_recorded.py::test_nothing_is_kept_or_given_when_turned_off": (
        "turned off, nothing kept is the answer; the file's other tests keep and give"
    ),
    "cli/test_fastpath.py::test_fast_path_declines_other_forms": "None is declining",
    "cli/test_fastpath.py::test_variant_fast_path_declines_other_forms": "None is declining",
    "cli/test_import_budget.py::test_short_answers_import_nothing_heavy": "_imported "
    "asserts exit 0",
    "cli/test_import_budget.py::test_project_commands_and_libtorch_list_import_what_they_use": (
        "_imported asserts exit 0"
    ),
    "cli/test_registry_fuzz.py::test_every_hostile_registry_case_ends_in_its_documented_exit": (
        "`wrong` holds each case's exit code and message"
    ),
    "integration/test_test_servers.py::test_the_watchdog_stops_servers_once_their_test_runs_end": (
        "server.wait() is the positive check"
    ),
    "unit/test_deploy_layers.py::test_an_auths_entry_that_is_not_a_mapping_is_no_credentials": (
        "None is 'no credentials'"
    ),
    "unit/test_framework_files_round3.py::test_a_plain_toolchain_file_lets_rustup_run": (
        "None is 'no problem'"
    ),
    "unit/test_gpu_nvml.py::test_nvml_that_cannot_start_falls_back_to_nvidia_smi": "None is "
    "the fallback",
    "unit/test_gpu_nvml.py::test_the_real_binding_without_a_driver_library_is_not_an_error": (
        "None is the fallback"
    ),
    "unit/test_manifest_merge.py::test_deleting_twice_stays_deleted": "{} is the merge",
    "unit/test_manifest_parse.py::test_empty_document_is_none": "None is an empty document",
    "unit/test_net_retry.py::test_client_errors_are_not_retried": "False is the answer",
    "unit/test_tasks_env.py::test_no_active_variant_exports_nothing": "None, None is the state",
    "unit/test_tasks_kinds.py::test_missing_nested_manifest_is_none": "None is 'no manifest'",
    "integration/test_tasks_signals.py::test_sigint_stops_the_script_and_its_children_exit_130": (
        "exit 130 is the positive result"
    ),
    "unit/test_builder_tools.py::test_nothing_missing_installs_nothing": "exit 0 of the "
    "install step is the positive result",
    "cli/test_docs_examples.py::test_no_shell_example_hides_outside_a_fence": "[] is the "
    "answer: the fenced examples run in test_the_example_runs",
    "cli/test_docs_site.py::test_every_relative_link_of_the_manual_and_the_readme_leads_to_a_file": (
        "[] is the answer: no link leads to nothing"
    ),
    "integration/test_hostile_index_round4.py::test_a_wheel_version_that_carries_code_is_refused_naming_the_index": (
        "`refused` asserts the exit code and the message naming the index"
    ),
    "integration/test_hostile_index_round4.py::test_version_py_s_cuda_that_carries_code_is_refused": (
        "`refused` asserts the exit code and the message naming the index"
    ),
    "integration/test_hostile_index_round4.py::test_an_index_error_does_not_print_the_token": (
        "`refused` asserts exit 5 and the URL shown as ***@host"
    ),
    "integration/test_reference_contract.py::test_the_run_time_contract_is_floDls": "{} is "
    "the answer: `_same` compares fdl's run with floDl's CLI's, case by case",
    "integration/test_signal_ends_the_group.py::test_sigterm_ends_a_project_commands_stubborn_helper_before_fdl_exits": (
        "exit 143 is the positive result"
    ),
    "integration/test_signal_ends_the_group.py::test_sigterm_during_a_streamed_build_ends_the_builds_whole_group": (
        "exit 143 is the positive result"
    ),
    "unit/test_generated_files_fuzz.py::test_every_hostile_class_is_refused_by_the_cpu_view_s_generators": (
        "the honest value's files (is not None) are the positive result"
    ),
    "unit/test_generated_files_fuzz.py::test_any_local_version_is_refused_or_written_as_one_piece": (
        "the honest value's files, and _assert_like_honest on what is written"
    ),
    "unit/test_nccl_plan.py::test_a_fifo_is_not_read": "None is the answer: nothing read",
    "unit/test_nccl_wiring.py::test_a_build_for_another_variant_or_half_installed_is_not_loaded": (
        "built_for(cu126) is not None is the positive check"
    ),
}


def _empty(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return not node.elts
    if isinstance(node, ast.Dict):
        return not node.keys
    return isinstance(node, ast.Constant) and (node.value in ("", None) or node.value is False)


def absence(test: ast.expr) -> bool:
    """Whether an assert's condition only says that something is not there."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(absence(value) for value in test.values)
    if not isinstance(test, ast.Compare):
        return False
    if all(isinstance(op, (ast.NotIn, ast.IsNot)) for op in test.ops):
        return True
    if all(isinstance(op, (ast.Is, ast.Eq)) for op in test.ops):
        last = test.comparators[-1]
        if _empty(last):
            return True
        counted = ast.unparse(test.left).startswith("len(")
        return counted and isinstance(last, ast.Constant) and last.value == 0
    return False


def exit_code(test: ast.expr) -> bool:
    """An assert on an exit code alone (`result.exit_code == 0`)."""
    return (
        isinstance(test, ast.Compare)
        and all(isinstance(op, ast.Eq) for op in test.ops)
        and ast.unparse(test.left).endswith(("exit_code", "returncode"))
    )


def _conditions(function: ast.FunctionDef) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            test = node.test
            both = isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
            found += test.values if both else [test]  # type: ignore[attr-defined]
    return found


def _raises(function: ast.FunctionDef) -> bool:
    return any(
        isinstance(node, ast.With)
        and any("raises" in ast.unparse(item.context_expr) for item in node.items)
        for node in ast.walk(function)
    )


def negative_only(source: str) -> list[str]:
    """The test functions in ``source`` whose asserts are absences (or exit codes beside
    absences) only."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test")):
            continue
        conditions = _conditions(node)
        if not any(absence(c) for c in conditions) or _raises(node):
            continue
        if all(absence(c) or exit_code(c) for c in conditions):
            names.append(node.name)
    return names


def test_the_scan_finds_an_absence_checked_on_a_failed_command() -> None:
    caught = (
        "def test_a(run_fdl):\n"
        "    result = run_fdl(['config', 'show'])\n"
        "    assert 'aliases expand' not in result.output\n"
        "def test_b(run_fdl):\n"
        "    result = run_fdl(['config', 'show'])\n"
        "    assert result.exit_code == 0 and 'x' not in result.output\n"
        "def test_c(value):\n"
        "    assert value is None\n"
    )
    shown = (
        "def test_d(run_fdl):\n"
        "    result = run_fdl(['config', 'show'])\n"
        "    assert result.exit_code == 0\n"
        "    assert 'a: 1' in result.stdout\n"
        "    assert 'aliases expand' not in result.output\n"
    )
    assert negative_only(caught) == ["test_a", "test_b", "test_c"]
    assert negative_only(shown) == []


def test_no_test_checks_only_an_absence() -> None:
    found = []
    scanned = 0
    for path in sorted(TESTS.rglob("test_*.py")):
        scanned += 1
        for name in negative_only(path.read_text(encoding="utf-8")):
            key = f"{path.relative_to(TESTS).as_posix()}::{name}"
            if key not in ABSENCE_IS_THE_ANSWER:
                found.append(key)
    assert scanned > 100  # the suite was read
    assert found == [], "show the positive result first (exit 0 and the value), then the absence"


def test_every_exception_still_exists() -> None:
    """An exception for a test since renamed or fixed is taken out of the list."""
    still = set()
    for path in sorted(TESTS.rglob("test_*.py")):
        for name in negative_only(path.read_text(encoding="utf-8")):
            still.add(f"{path.relative_to(TESTS).as_posix()}::{name}")
    assert set(ABSENCE_IS_THE_ANSWER) - still == set()
