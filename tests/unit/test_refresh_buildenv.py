"""`python -m fdl.refresh buildenv`: where a PyTorch tree honours each input of a plan,
checked on the contract tree (tests/fixtures/fake-pytorch)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from fdl.refresh._honoured import TREE_FILES, where_honoured

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "fake-pytorch"


def test_each_input_is_found_at_the_line_that_honours_it() -> None:
    names = ["TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "USE_CUDA", "CMAKE_C_COMPILER_LAUNCHER"]
    rows = {r.name: r for r in where_honoured(TREE, [*names, "CCACHE_DIR"], TREE_FILES)}
    arch = rows["TORCH_CUDA_ARCH_LIST"]
    assert arch.how == "reads the environment" and "$ENV{TORCH_CUDA_ARCH_LIST}" in arch.text
    line = int(str(arch.where).rsplit(":", 1)[1])
    assert (
        "$ENV{TORCH_CUDA_ARCH_LIST}" in (TREE / "CMakeLists.txt").read_text().splitlines()[line - 1]
    )
    assert rows["MAX_JOBS"].where is not None
    assert rows["MAX_JOBS"].where.startswith("tools/build_libtorch.py:")
    assert rows["USE_CUDA"].how == "CMake option"
    assert rows["CMAKE_C_COMPILER_LAUNCHER"].how.startswith("passed to CMake by the prefix rule")
    assert (rows["CCACHE_DIR"].how, rows["CCACHE_DIR"].where) == ("ccache", None)
    assert rows["tools/build_libtorch.py"].how == "runs it"
    # the contract tree has none: reported, not dropped, and not needed by this plan
    assert (rows["requirements.txt"].how, rows["requirements.txt"].ok) == ("absent", True)
    assert all(row.checked for row in rows.values())  # each row says what it checked


def test_a_variable_no_file_reads_is_reported_and_fails_the_check(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"env": {"TORCH_CUDA_ARCH_LIST": "6.1", "FDL_NO_SUCH": "1"}}))
    done = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan), "--source", str(TREE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "| `FDL_NO_SUCH` | 1 | - | no build file reads it | not honoured |" in done.stdout
    plan.write_text(json.dumps({"env": {"TORCH_CUDA_ARCH_LIST": "6.1"}}))
    ok = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan), "--source", str(TREE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan), "--source", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "not a PyTorch source tree" in bad.stderr


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree)
    return tree


def test_the_line_that_acts_is_cited_not_the_first_textual_hit(tmp_path: Path) -> None:
    """MAX_JOBS: PyTorch's cmake.py build() decides the parallelism; nccl.cmake (a
    dependency's build, searched first as CMake) only passes it on."""
    tree = _copy(tmp_path)
    (tree / "cmake" / "External").mkdir(exist_ok=True)
    (tree / "cmake" / "External" / "nccl.cmake").write_text('set(NCCL_JOBS "$ENV{MAX_JOBS}")\n')
    helpers = tree / "tools" / "setup_helpers"
    helpers.mkdir()
    (helpers / "cmake.py").write_text(
        "import os\n\n\nclass CMake:\n    def build(self, env):\n"
        '        os.environ["MAX_JOBS"] = "1"  # not a read\n'
        '        max_jobs = os.getenv("MAX_JOBS")\n        return max_jobs\n'
    )
    (tree / "tools" / "build_libtorch.py").write_text("import os\n")
    rows = {r.name: r for r in where_honoured(tree, {"MAX_JOBS": "4"}, TREE_FILES)}
    assert rows["MAX_JOBS"].where == "tools/setup_helpers/cmake.py:7"
    assert rows["MAX_JOBS"].how == "reads the environment in build()"
    assert rows["MAX_JOBS"].checked == "a positive count"


def test_a_wrong_value_and_a_missing_file_fail_with_what_was_checked(tmp_path: Path) -> None:
    """The tree's arch patterns take `a` suffixes only (as PyTorch's
    select_compute_arch.cmake): 12.0f is refused at the line that would refuse it."""
    tree = _copy(tmp_path)
    select = tree / "cmake" / "SelectCudaArch.cmake"
    select.write_text(select.read_text().replace("([af]?)", "(a?)"))
    (tree / ".gitmodules").write_text('[submodule "x"]\n\tpath = third_party/pybind11\n')
    env = {"TORCH_CUDA_ARCH_LIST": "6.1;12.0f", "MAX_JOBS": "4x", "USE_CUDA": "maybe"}
    plan = {
        "torch": "2.13.0",
        "env": env,
        "commands": [
            {"what": "deps", "argv": ["pip", "install", "-r", f"{tree}/requirements-build.txt"]}
        ],
    }
    rows = {r.name: r for r in where_honoured(tree, env, TREE_FILES, plan=plan)}
    arch = rows["TORCH_CUDA_ARCH_LIST"]
    assert (arch.how, arch.ok) == ("value refused", False)
    assert arch.text.startswith("12.0f: no arch pattern of the tree matches it")
    assert "cmake/SelectCudaArch.cmake:" in arch.checked
    assert rows["MAX_JOBS"].text == "'4x' is not a positive count"
    assert rows["USE_CUDA"].text == "'maybe' is no CMake boolean"
    needed = rows["requirements-build.txt"]
    assert (needed.how, needed.ok, needed.where) == ("missing", False, None)
    assert rows["submodules"].text == "1 missing or empty: third_party/pybind11"
    good = {"TORCH_CUDA_ARCH_LIST": "6.1;12.0a+PTX", "MAX_JOBS": "4", "USE_CUDA": "ON"}
    rows = {r.name: r for r in where_honoured(tree, good, TREE_FILES, plan={"torch": "2.13.0"})}
    assert all(rows[name].ok for name in good)
    assert rows["version.txt"].checked == "that it names the plan's torch 2.13.0"
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan_file), "--source", str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and "| value refused |" in done.stdout


def test_variables_fdl_sets_for_other_readers_are_not_flagged() -> None:
    env = {"CUDACXX": "/usr/local/cuda/bin/nvcc", "CUDA_HOME": "/usr/local/cuda"}
    rows = {r.name: r for r in where_honoured(TREE, env, ())}
    assert rows["CUDACXX"].ok and rows["CUDACXX"].how.startswith("CMake")
    assert rows["CUDA_HOME"].ok and rows["CUDA_HOME"].how == "fdl's own setting"


def test_without_an_arch_file_fdls_grammar_for_the_tree_release_checks(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    (tree / "cmake" / "SelectCudaArch.cmake").write_text("# no arch selection here\n")
    env = {"TORCH_CUDA_ARCH_LIST": "6.1;12.0f"}
    (row,) = where_honoured(tree, env, (), plan={"torch": "2.13.0"})[:1]
    assert not row.ok and "takes no family targets" in row.text
    assert row.checked == "each entry against fdl's grammar for torch 2.13.0 (no arch file found)"
