"""Start-up latency of the CLI against the bare interpreter.

Median wall time of `fdl --version`, `fdl --help` and `fdl config show` (on
the 3-layer example: base + inherited file + overlay) compared with
`python -c pass` on the same interpreter. Target: `config show` within 4x.

    python bench/cli_latency.py [--runs 30] [--fdl PATH-TO-fdl-SCRIPT] [--no-reference]

Then fdl against floDl's own CLI (flodl-cli 0.5.3, a Rust binary, built once by
scripts/setup-reference-cli.sh into the tests' cache) in one interleaved run on floDl
0.5.3's manifests (tests/fixtures/flodl-0.5.3) with two libtorch variants: each round runs
every command of both once, in an order rotated per round; the table gives the median and
the range of the rounds (wall time), and the median CPU time (user + system, which the
machine's load disturbs less).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median_ms, print_table, wall_times

# (what, fdl's arguments, floDl's arguments): the same question to both CLIs
VERSUS = [
    ("--version", ["--version"], ["--version"]),
    ("--help (in a project)", ["--help"], ["--help"]),
    ("config show", ["config", "show"], ["config", "show"]),
    # floDl's CLI has no dry run: its help of a run: command shows the command line
    ("what `test` runs (fdl --dry-run, floDl --help)", ["test", "--dry-run"], ["test", "--help"]),
    ("test --help", ["test", "--help"], ["test", "--help"]),
    ("ddp-bench --help (schema, presets)", ["ddp-bench", "--help"], ["ddp-bench", "--help"]),
    ("libtorch list", ["libtorch", "list"], ["libtorch", "list"]),
    ("libtorch info", ["libtorch", "info"], ["libtorch", "info"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--fdl", help="the fdl console script (default: python -m fdl with this checkout)"
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="leave out floDl's CLI (no cargo build)"
    )
    args = parser.parse_args()

    env = dict(os.environ, NO_COLOR="1")
    # Measure what users get: byte-code caches written (pip compiles on install).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "fdl")], check=False)
    script = Path(args.fdl) if args.fdl else Path(sys.executable).parent / "fdl"
    if script.exists():
        fdl = [str(script)]
    else:
        env["PYTHONPATH"] = str(REPO)
        fdl = [sys.executable, "-m", "fdl"]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(REPO / "tests" / "fixtures" / "manifest-project", project)
        baseline = median_ms(wall_times([sys.executable, "-c", "pass"], runs=args.runs, env=env))
        rows = [("python -c pass", f"{baseline:.1f}", "1.00x")]
        for label, extra in [
            ("fdl --version", ["--version"]),
            ("fdl --help", ["--help"]),
            ("fdl config show (3 layers)", ["--env", "ci", "config", "show"]),
            ("fdl config show --json", ["--env", "ci", "config", "show", "--json"]),
            ("fdl config explain", ["--env", "ci", "config", "explain"]),
        ]:
            ms = median_ms(wall_times([*fdl, *extra], runs=args.runs, cwd=project, env=env))
            rows.append((label, f"{ms:.1f}", f"{ms / baseline:.2f}x"))
    print(f"median of {args.runs} runs, interpreter {sys.executable}, fdl = {' '.join(fdl)}")
    print_table(["command", "median ms", "vs python"], rows)
    if not args.no_reference:
        print()
        versus(fdl, env, runs=args.runs)


def _flodl_project(root: Path) -> Path:
    """floDl 0.5.3's manifests with a CPU and an active CUDA variant (as in the parity tests)."""
    sys.path.insert(0, str(REPO))
    from tests.support.libtorch_trees import make_tree

    project = root / "flodl"
    shutil.copytree(REPO / "tests" / "fixtures" / "flodl-0.5.3", project)
    for example in project.rglob("fdl.yml.example"):
        example.rename(example.with_name("fdl.yml"))
    lib = project / "libtorch" / "precompiled"
    make_tree(lib / "cpu", "2.10.0+cpu")
    make_tree(lib / "cu126", "2.10.0+cu126", cubins=[50, 60, 70, 75, 80, 86, 90])
    (lib / "cpu" / ".arch").write_text("cuda=none\ntorch=2.10.0\narchs=cpu\n")
    (lib / "cu126" / ".arch").write_text("cuda=12.6\ntorch=2.10.0\narchs=5.0 6.0 7.0 7.5 8.0\n")
    (project / "libtorch" / ".active").write_text("precompiled/cu126")
    return project


def _spread(values: list[float]) -> str:
    return f"{median_ms(values):.1f} ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"


def versus(fdl: list[str], env: dict[str, str], *, runs: int) -> None:
    """fdl and floDl's CLI, interleaved: a table of medians and ranges."""
    import resource
    import time

    sys.path.insert(0, str(REPO))
    from tests.support.reference_cli import installed_reference

    reference, problem = installed_reference()
    if reference is None:
        raise SystemExit(f"floDl's CLI is not available: {problem}")
    with tempfile.TemporaryDirectory() as tmp:
        project = _flodl_project(Path(tmp))
        home = Path(tmp) / "home"
        home.mkdir()
        # HOME of its own: floDl's CLI writes its update-check state there (checks disabled);
        # FDL_COMPOSE: fdl would ask the docker engine which compose to use for the dry run
        env = dict(env, HOME=str(home), FDL_NO_UPDATE_CHECK="1", FDL_IN_CONTAINER="0",
                   FDL_COMPOSE="docker compose")  # fmt: skip
        sides = [(label, side, argv) for label, ours, theirs in VERSUS
                 for side, argv in (("fdl", [*fdl, *ours]), ("floDl", [str(reference), *theirs]))]  # fmt: skip
        times: dict[tuple[str, str], list[float]] = {(label, side): [] for label, side, _ in sides}
        # CPU time (user + system) of each run too: wall time swings with the machine's load
        cpu: dict[tuple[str, str], list[float]] = {(label, side): [] for label, side, _ in sides}
        for label, side, argv in sides:  # warm-up, and both must answer
            got = subprocess.run(argv, cwd=project, env=env, capture_output=True, check=False)
            if got.returncode != 0:
                raise SystemExit(f"{side} {label}: exit {got.returncode}: {got.stderr[-300:]!r}")
        for round_ in range(runs):
            shift = round_ % len(sides)
            for label, side, argv in sides[shift:] + sides[:shift]:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(argv, cwd=project, env=env, capture_output=True, check=False)
                times[(label, side)].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                cpu[(label, side)].append(used)
    print(
        f"fdl against floDl's CLI ({reference}): median (min-max) ms of {runs} interleaved rounds"
    )
    rows = []
    for label, _, _ in VERSUS:
        ours, theirs = times[(label, "fdl")], times[(label, "floDl")]
        ratio = median_ms(ours) / median_ms(theirs)
        cpu_ours, cpu_theirs = cpu[(label, "fdl")], cpu[(label, "floDl")]
        rows.append(
            (label, _spread(ours), _spread(theirs), f"{ratio:.0f}x",
             f"{median_ms(cpu_ours):.0f}", f"{median_ms(cpu_theirs):.1f}")
        )  # fmt: skip
    headers = ["command", "fdl ms", "floDl ms", "fdl / floDl", "fdl CPU ms", "floDl CPU ms"]
    print_table(headers, rows)


if __name__ == "__main__":
    main()
