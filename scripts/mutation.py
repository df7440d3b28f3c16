"""Mutation testing of fdl's pure decision modules (mutmut 3), by hand or weekly, never in CI.

Each module runs alone with the fast unit tests that cover it, in a scratch copy of the tree
(mutmut mutates a copy under mutants/; the worktree is never touched), at low priority and with
one or two workers: the figures per module, then the survivors, are printed as a table.

    .venv/bin/python scripts/mutation.py                # every module below
    .venv/bin/python scripts/mutation.py compose text   # the modules whose name has a word
    .venv/bin/python scripts/mutation.py --workers 2 --keep

Needs the dev extra (mutmut is pinned there). The figures and every survivor, with why it is
harmless, are in docs/development.md ("Mutation testing"): update them with each run that
changes them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
UNIT = "tests/unit/"


@dataclass(frozen=True)
class Module:
    name: str
    path: str
    tests: tuple[str, ...]


# The pure decision modules and the fast unit tests that cover each: pytest arguments, a bare
# file name being one of tests/unit/. Every mutant runs the selected tests that reach the
# mutated function, fastest first, up to the first failure: a survivor costs all of them, so
# the long property tests (thousands of examples) stay out and examples kill what they did.
MODULES: tuple[Module, ...] = (
    Module(
        "manifest merge",
        "fdl/manifest/_merge.py",
        ("test_manifest_merge.py", "test_mutation_kills_manifest.py"),
    ),
    Module(
        "manifest explain",
        "fdl/manifest/_explain.py",
        (
            "test_manifest_merge.py",
            "test_mutation_kills_manifest.py",
            "test_manifest_explain_scale.py",
            "-k",
            "not token and not resolve_plain and not render_show",
        ),
    ),
    Module(
        "masking",
        "fdl/manifest/_secrets.py",
        (
            "test_mutation_kills_masking.py",
            "test_manifest_secrets.py",
            "-k",
            "not the_needles_never",
        ),
    ),
    Module(
        "printable",
        "fdl/_text.py",
        ("test_generated_files_fuzz.py", "test_mutation_kills_text.py"),
    ),
    Module(
        "grammars (CMake, linker, one-line)",
        "fdl/_grammar.py",
        ("test_generated_files_fuzz.py", "test_sbatch_grammar.py", "test_mutation_kills_text.py"),
    ),
    Module(
        "compat rules",
        "fdl/compat/rules.py",
        (
            "test_mutation_kills_compat.py",
            "test_compat_rules.py",
            "test_compat_queries.py",
            "test_libtorch_select.py",
        ),
    ),
    Module(
        "compat archs",
        "fdl/compat/archs.py",
        (
            "test_mutation_kills_compat.py",
            "test_archs.py",
            "test_compat_rules.py",
            "test_compat_queries.py",
            "test_compat_tables.py",
        ),
    ),
    Module(
        "variant selection",
        "fdl/libtorch/_select.py",
        ("test_libtorch_select.py", "test_mutation_kills_select.py", "test_compat_platforms.py"),
    ),
    Module(
        "sbatch lines",
        "fdl/deploy/_slurm.py",
        (
            "test_mutation_kills_sbatch.py",
            "test_sbatch_grammar.py",
            "test_deploy.py",
            "test_generated_files_fuzz.py",
            "tests/golden/test_deploy_golden.py",
        ),
    ),
    Module(
        "compose lines",
        "fdl/tasks/_compose.py",
        (
            "test_tasks_compose.py",
            "test_mutation_kills_compose.py",
            "test_generated_files_fuzz.py",
            "test_sbatch_grammar.py",
        ),
    ),
    Module(
        "source chooser",
        "fdl/libtorch/_choose.py",
        ("test_choose.py", "test_mutation_kills_choose.py"),
    ),
)

# what the tests read besides fdl/ and tests/ (asset folders, the pytest configuration)
_COPIED = ("fdl", "tests", "templates", "dockerfiles", "recipes", "docs")
_STATUS = re.compile(r"^\s+(\S+): (.+)$")


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def _scratch(module: Module, root: Path) -> Path:
    work = root / Path(module.path).stem.lstrip("_")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in _COPIED:
        shutil.copytree(
            REPO / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    tests = tuple(
        f"{UNIT}{arg}" if "/" not in arg and (arg.endswith(".py") or ".py::" in arg) else arg
        for arg in module.tests
    )
    config = (
        "\n[tool.mutmut]\n"
        'source_paths = ["fdl"]\n'
        f'only_mutate = ["{module.path}"]\n'
        'also_copy = ["templates", "dockerfiles", "recipes", "docs"]\n'
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
    )
    (work / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text() + config)
    return work


def _statuses(work: Path, mutmut: str) -> dict[str, str]:
    out = subprocess.run(
        [mutmut, "results", "--all", "true"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {m[1]: m[2] for line in out.splitlines() if (m := _STATUS.match(line))}


def _change(work: Path, mutmut: str, name: str) -> str:
    """The mutant's changed lines, as `mutmut show` gives them."""
    diff = subprocess.run(
        [mutmut, "show", name], cwd=work, capture_output=True, text=True, check=False
    ).stdout
    lines = [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return " => ".join(" ".join(line[1:].split()) for line in lines)


def _line(name: str, counts: list[int], took: float) -> str:
    mutants, killed, survived, timeout, other = counts
    score = 100 * (killed + timeout) / mutants if mutants else 100.0
    return (
        f"| {name} | {mutants} | {killed} | {survived} | {timeout} | {other} "
        f"| {score:.1f} | {took:.0f} s |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("words", nargs="*", help="run the modules whose name has one of these")
    parser.add_argument("--workers", type=int, default=1, help="mutmut's children (1 or 2)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies")
    args = parser.parse_args()
    chosen = [m for m in MODULES if not args.words or any(w in m.name for w in args.words)]
    if not chosen:
        parser.error(f"no module matches {args.words}")
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    if not Path(mutmut).exists():
        parser.error("mutmut is not installed: pip install -e '.[dev]'")
    root = Path(tempfile.mkdtemp(prefix="fdl-mutation-"))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("FDL_REQUIRE_ALL", None)
    rows: list[tuple[str, int, int, int, int, int, float]] = []
    survivors: list[tuple[str, str, str]] = []
    failed: list[str] = []
    try:
        for module in chosen:
            work = _scratch(module, root)
            started = time.monotonic()
            run = subprocess.run(
                ["nice", "-n", "10", mutmut, "run", "--max-children", str(args.workers)],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.monotonic() - started
            if run.returncode != 0:
                print(f"{module.name}: mutmut failed ({run.returncode})\n{run.stdout[-3000:]}")
                print(run.stderr[-3000:])
                failed.append(module.name)
                continue
            statuses = _statuses(work, mutmut)
            counts = {
                s: sum(1 for v in statuses.values() if v == s) for s in set(statuses.values())
            }
            killed = counts.get("killed", 0)
            survived = counts.get("survived", 0)
            timeout = counts.get("timeout", 0)
            other = len(statuses) - killed - survived - timeout
            rows.append((module.name, len(statuses), killed, survived, timeout, other, took))
            survivors += [
                (module.name, name, _change(work, mutmut, name))
                for name, status in statuses.items()
                if status not in ("killed", "timeout")
            ]
            print(f"{module.name}: {killed}/{len(statuses)} killed in {took:.0f} s", flush=True)
    finally:
        if args.keep:
            print(f"scratch copies kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print("| module | mutants | killed | survived | timeout | no test, other | killed % | time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    totals = [0, 0, 0, 0, 0]
    for name, mutants, killed, survived, timeout, other, took in rows:
        print(_line(name, [mutants, killed, survived, timeout, other], took))
        totals = [
            t + v for t, v in zip(totals, (mutants, killed, survived, timeout, other), strict=True)
        ]
    if len(rows) > 1:
        print(_line("all", totals, sum(row[6] for row in rows)))
    if survivors:
        print("\nsurvivors (mutmut show NAME in a --keep copy shows each):")
        for module_name, name, change in survivors:
            print(f"  {module_name}: {name}\n      {change}")
    if failed:
        print(f"\nnot measured (mutmut failed): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
