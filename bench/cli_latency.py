"""Start-up latency of the CLI against the bare interpreter and floDl's own CLI, in one run.

Every command below runs once per round, in an order rotated per round, beside
`python -c pass` on the same interpreter (so a busy machine slows all of them alike);
the tables give the median and range of the rounds (wall time) and the median CPU time
(user + system, which the machine's load disturbs less). Goals (issue 36):

- `fdl --help` at most 3x Python's start, `fdl version` at most 2x, `fdl config show` at
  most 2x (issue 44; 3x before);
- a project command (`run: "true"`) run again at most 2.5x, a `docker:` one at most 3x
  with its one docker call (issue 44);
- `fdl config explain` at most 1.5x `fdl config show`, on the 3-layer example and, with
  `--large`, on a manifest of 10,000 commands over 20 layers (written by
  bench/manifest_scale.py's generator).

fdl runs as users run it: its console script (which imports `re` itself), byte-code
written. The example is tests/fixtures/manifest-project (base + inherited file + overlay,
a nested manifest) with one command added, `noop` (`run: "true"`): its row is fdl's own
cost around a project command that does nothing. floDl's CLI (flodl-cli 0.5.3, a Rust
binary, built once by scripts/setup-reference-cli.sh into the tests' cache) answers the
same questions on floDl 0.5.3's manifests (tests/fixtures/flodl-0.5.3) with two libtorch
variants. floDl's CLI 0.8.0 runs the same two project commands as fdl (issue 44) on a
small project of its own: `noop` (`run: "true"`) and `hi` (`docker: dev`, through the
recording fake docker; floDl's CLI runs in a bubblewrap root without `/.dockerenv`, as
fdl runs with FDL_IN_CONTAINER=0, and bubblewrap's own start is a row of its own). A
reference that is not installed is said in the table. fdl's project commands are
measured as a user meets them: their plan kept by an earlier run and replayed
(fdl.tasks._replay); the `planned` rows turn that off (FDL_PLAN_CACHE=0).

fdl reads an unchanged manifest from its parse cache (fdl.manifest._parsed), and gives
`config show|explain`'s answer again while nothing it read has changed (fdl._recorded);
the first run after an edit parses it with PyYAML: the `first run after an edit` rows
measure that (both caches turned off).

    python bench/cli_latency.py [--runs 30] [--fdl PATH-TO-fdl] [--no-reference] [--large]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median_ms, print_table

# (label, project, fdl's arguments, floDl's arguments or None, extra environment)
Row = tuple[str, str, list[str], "list[str] | None", dict[str, str]]
# (label, project, argv, extra environment)
Run = tuple[str, str, list[str], dict[str, str]]
EXAMPLE: list[Row] = [
    ("--version", "example", ["--version"], None, {}),
    ("version", "example", ["version"], None, {}),
    ("--help", "example", ["--help"], None, {}),
    ("config show", "example", ["--env", "ci", "config", "show"], None, {}),
    ("config show --json", "example", ["--env", "ci", "config", "show", "--json"], None, {}),
    ("config explain", "example", ["--env", "ci", "config", "explain"], None, {}),
    (
        "config show, first run after an edit",
        "example",
        ["--env", "ci", "config", "show"],
        None,
        {"FDL_MANIFEST_CACHE": "0", "FDL_PLAN_CACHE": "0"},
    ),
    # a project command: what `--dry-run` prints, and fdl's overhead around a real run
    ("test --dry-run (project command)", "example", ["--env", "ci", "test", "--dry-run"], None, {}),
    ("noop (project command, run: true)", "example", ["noop"], None, {}),
    ("noop, planned (no kept plan)", "example", ["noop"], None, {"FDL_PLAN_CACHE": "0"}),
    # docker: dev through a fake docker (a shell script): fdl's cost around its one call
    ("hi (docker: project command)", "example", ["hi"], None, {"FDL_COMPOSE": ""}),
    (
        "hi, planned (no kept plan)",
        "example",
        ["hi"],
        None,
        {"FDL_COMPOSE": "", "FDL_PLAN_CACHE": "0"},
    ),
    (
        "--help, first run after an edit",
        "example",
        ["--help"],
        None,
        {"FDL_MANIFEST_CACHE": "0", "FDL_PLAN_CACHE": "0"},
    ),
]
# the same question to both CLIs, on floDl's manifests
VERSUS: list[Row] = [
    ("floDl: --version", "flodl", ["--version"], ["--version"], {}),
    ("floDl: --help", "flodl", ["--help"], ["--help"], {}),
    ("floDl: config show", "flodl", ["config", "show"], ["config", "show"], {}),
    # floDl's CLI has no dry run: its help of a run: command shows the command line
    ("floDl: what `test` runs", "flodl", ["test", "--dry-run"], ["test", "--help"], {}),
    ("floDl: test --help", "flodl", ["test", "--help"], ["test", "--help"], {}),
    (
        "floDl: ddp-bench --help (schema, presets)",
        "flodl",
        ["ddp-bench", "--help"],
        ["ddp-bench", "--help"],
        {},
    ),
    ("floDl: libtorch list", "flodl", ["libtorch", "list"], ["libtorch", "list"], {}),
    ("floDl: libtorch info", "flodl", ["libtorch", "info"], ["libtorch", "info"], {}),
]
# floDl's CLI 0.8.0 beside fdl on the same project commands (issue 44)
CONTRACT: list[Row] = [
    ("0.8.0: noop (run: true)", "commands", ["noop"], ["noop"], {}),
    ("0.8.0: hi (docker: dev)", "commands", ["hi"], ["hi"], {"FDL_COMPOSE": ""}),
]
BWRAP_ROW = "bubblewrap's own start (bwrap ... true)"
LARGE_SHOW = "10k commands x 20 layers: config show"
LARGE_EXPLAIN = "10k commands x 20 layers: config explain"
# (what, numerator row, denominator row, at most)
GOALS = [
    ("config show / python -c pass", "config show", "python -c pass", 2.0),
    ("--help / python -c pass", "--help", "python -c pass", 3.0),
    ("version / python -c pass", "version", "python -c pass", 2.0),
    ("config explain / config show", "config explain", "config show", 1.5),
    # issue 44: a project command's own cost; a docker: one's includes its one docker call
    ("noop / python -c pass", "noop (project command, run: true)", "python -c pass", 2.5),
    ("docker: command / python -c pass", "hi (docker: project command)", "python -c pass", 3.0),
    ("10k x 20: config explain / config show", LARGE_EXPLAIN, LARGE_SHOW, 1.5),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--fdl", help="the fdl console script (default: the one beside python)")
    parser.add_argument(
        "--no-reference", action="store_true", help="leave out floDl's CLI (no cargo build)"
    )
    parser.add_argument(
        "--large", action="store_true", help="add the 10,000 commands x 20 layers manifest"
    )
    parser.add_argument(
        "--large-runs", type=int, default=5, help="rounds that run the large manifest (5 s each)"
    )
    args = parser.parse_args()

    env = dict(os.environ, NO_COLOR="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # what users get: pip compiles on install
    env.pop("FDL_MANIFEST_CACHE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "fdl")], check=False)
    script = Path(args.fdl) if args.fdl else Path(sys.executable).parent / "fdl"
    if script.exists():
        fdl = [str(script)]
    else:
        env["PYTHONPATH"] = str(REPO)
        fdl = [sys.executable, "-m", "fdl"]
    sys.path.insert(0, str(REPO))
    from tests.support.reference_cli import (
        CONTRACT_VERSION,
        REFERENCE_VERSION,
        _bwrap_problem,
        _bwrap_root,
        installed_reference,
    )

    # floDl's CLI per version, or why it is not in the table
    references: dict[str, Path | None] = {}
    missing: dict[str, str] = {}
    for version in (REFERENCE_VERSION, CONTRACT_VERSION):
        found, problem = (
            (None, "--no-reference") if args.no_reference else installed_reference(version)
        )
        references[version] = found
        if found is None:
            missing[version] = problem.splitlines()[0][:120] if problem else "not installed"
    bwrap = shutil.which("bwrap")
    sandbox_problem = _bwrap_problem(bwrap)
    rows = EXAMPLE + (VERSUS if references[REFERENCE_VERSION] is not None else []) + CONTRACT
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        # a cache of its own (the parse cache starts empty; the warm-up run fills it) and a
        # HOME of its own (floDl's CLI writes its update-check state there, checks off);
        # FDL_COMPOSE: fdl would ask the docker engine which compose to use for a dry run
        env = dict(env, HOME=str(home), FDL_CACHE_DIR=str(root / "cache"),
                   FDL_NO_UPDATE_CHECK="1", FDL_IN_CONTAINER="0",
                   FDL_COMPOSE="docker compose")  # fmt: skip
        projects = {"example": root / "example"}
        shutil.copytree(REPO / "tests" / "fixtures" / "manifest-project", projects["example"])
        with (projects["example"] / "fdl.yml").open("a", encoding="utf-8") as manifest:
            manifest.write('  noop:\n    description: fdl\'s own cost\n    run: "true"\n')
            manifest.write("  hi:\n    run: echo hi\n    docker: dev\n")
        (projects["example"] / "docker-compose.yml").write_text(
            "services:\n  dev:\n    image: debian\n    volumes: ['.:/workspace']\n"
        )
        sys.path.insert(0, str(REPO))
        from tests.support.fake_docker import make_fake_docker

        fake = make_fake_docker(root / "fake-docker", buildx=True, compose=True)
        env["PATH"] = os.pathsep.join([str(fake.folder), env.get("PATH", "")])
        projects["commands"] = _commands_project(root)
        if references[REFERENCE_VERSION] is not None:
            projects["flodl"] = _flodl_project(root)
        if args.large:
            projects["large"], environ, options = _large_project(root)
            rows += [
                (LARGE_SHOW, "large", [*options, "config", "show"], None, environ),
                (LARGE_EXPLAIN, "large", [*options, "config", "explain"], None, environ),
            ]
        runs: list[Run] = [("python -c pass", "example", [sys.executable, "-c", "pass"], {})]
        sandbox = [] if sandbox_problem else [str(bwrap), *_bwrap_root(False)]
        if sandbox:
            runs.append((BWRAP_ROW, "commands", [*sandbox, "true"], {}))
        for label, project, ours, asked, extra in rows:
            runs.append((label, project, [*fdl, *ours], extra))
            version = CONTRACT_VERSION if (label, project) in _keys(CONTRACT) else REFERENCE_VERSION
            binary = references[version]
            if asked is None or binary is None:
                continue
            if "docker" in label:  # floDl's CLI reads /.dockerenv: a root without it
                if not sandbox:
                    missing[f"{version} (docker:)"] = sandbox_problem
                    continue
                where = ["--chdir", str(projects[project])]
                runs.append(
                    (f"{label} [floDl's CLI]", project, [*sandbox, *where, str(binary), *asked], {})
                )
            else:
                runs.append((f"{label} [floDl's CLI]", project, [str(binary), *asked], {}))
        limits = {LARGE_SHOW: args.large_runs, LARGE_EXPLAIN: args.large_runs}
        wall, cpu = _measure(runs, projects, env, rounds=args.runs, limits=limits)
        # the docker: command's runs (its warm-up, then `runs` rounds): one call each
        docker_calls, docker_runs = len(fake.calls()), len(fake.calls_of("compose run"))
    print(
        f"the fake docker: {docker_calls} calls in {docker_runs} runs of the docker: commands "
        "(fdl's, planned and replayed, and floDl's CLI's)"
    )
    for version, problem in missing.items():
        print(f"floDl's CLI {version}: not in the table ({problem})")
    base = median_ms(wall["python -c pass"])
    print(f"median (min-max) ms of {args.runs} interleaved rounds; interpreter {sys.executable}")
    print(f"fdl = {' '.join(fdl)}; load average before: {os.getloadavg()[0]:.2f}")
    table = []
    for label, *_ in runs:
        if label.endswith("[floDl's CLI]"):
            continue
        median = median_ms(wall[label])
        reference_times = wall.get(f"{label} [floDl's CLI]")
        versus = (
            (_spread(reference_times), f"{median / median_ms(reference_times):.1f}x")
            if reference_times
            else ("not installed", "") if (label, "commands") in _keys(CONTRACT)
            else ("", "")
        )  # fmt: skip
        table.append(
            (label, _spread(wall[label]), f"{median / base:.2f}x",
             f"{median_ms(cpu[label]):.1f}", *versus)
        )  # fmt: skip
    print_table(
        ["command", "fdl ms", "vs python", "fdl CPU ms", "floDl's CLI ms", "fdl/floDl"], table
    )
    print()
    goals = []
    for what, top, bottom, most in GOALS:
        if top not in wall or bottom not in wall:
            continue
        ratio = median_ms(wall[top]) / median_ms(wall[bottom])
        by_cpu = median_ms(cpu[top]) / median_ms(cpu[bottom])
        met = "met" if ratio <= most else "NOT met"
        goals.append((what, f"{ratio:.2f}x", f"{by_cpu:.2f}x", f"<= {most:g}x", met))
    print_table(["goal", "wall", "CPU", "at most", ""], goals)


def _measure(
    runs: list[Run],
    projects: dict[str, Path],
    env: dict[str, str],
    *,
    rounds: int,
    limits: dict[str, int],
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each run, ``rounds`` times (those in ``limits`` only in that
    many rounds), rotated (after two warm-up runs that also check each answers)."""
    wall: dict[str, list[float]] = {label: [] for label, *_ in runs}
    cpu: dict[str, list[float]] = {label: [] for label, *_ in runs}
    for label, project, argv, extra in runs + runs:  # twice: fdl's caches, then its plans kept
        got = subprocess.run(
            argv, cwd=projects[project], env={**env, **extra}, capture_output=True, check=False
        )
        if got.returncode != 0:
            raise SystemExit(f"{label}: exit {got.returncode}: {got.stderr[-300:]!r}")
    for round_ in range(rounds):
        shift = round_ % len(runs)
        for label, project, argv, extra in runs[shift:] + runs[:shift]:
            if len(wall[label]) >= limits.get(label, rounds):
                continue
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(
                argv, cwd=projects[project], env={**env, **extra}, capture_output=True,
                check=False,
            )  # fmt: skip
            wall[label].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            cpu[label].append(used)
    return wall, cpu


def _keys(rows: list[Row]) -> set[tuple[str, str]]:
    return {(label, project) for label, project, *_ in rows}


def _commands_project(root: Path) -> Path:
    """The two project commands, in a manifest both CLIs read (floDl's CLI 0.8.0 and fdl)."""
    project = root / "commands"
    project.mkdir()
    (project / "fdl.yml").write_text(
        'commands:\n  noop:\n    run: "true"\n  hi:\n    run: echo hi\n    docker: dev\n'
    )
    (project / "docker-compose.yml").write_text(
        "services:\n  dev:\n    image: debian\n    volumes: ['.:/workspace']\n"
    )
    return project


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


def _large_project(root: Path) -> tuple[Path, dict[str, str], list[str]]:
    """10,000 commands over 20 layers (16 inherited files, base, overlay, FDL__ variables
    and --set, by bench/manifest_scale.py's generator): the project, its variables and
    fdl's options for it."""
    from manifest_scale import write_project

    project = root / "large"
    project.mkdir()
    environ, sets = write_project(project, 10_000)
    return project, environ, ["--env", "ci"] + [arg for s in sets for arg in ("--set", s)]


def _spread(values: list[float]) -> str:
    return f"{median_ms(values):.1f} ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"


if __name__ == "__main__":
    main()
