"""Start-up budget: the short answers import nothing heavy, and a failure names the line.

`fdl version`, `--help` and `config show|explain` are what scripts, editors and people run
most; bench/cli_latency.py measures them against Python's own start (goals: 2x, 3x, and
explain within 1.5x show). Times are not asserted here (they vary with the machine); what
makes them is: each module below costs milliseconds to import (measured on this project's
CI machine; the comment says what), and none of them is needed to answer. The test runs
each command in a fresh interpreter with an import hook that records which line of fdl
imported each module, so a failure says "yaml, imported by fdl/manifest/render.py:19",
not only that start-up got slower. Project commands (a dry run, a real run of `true`, an
entry's dry run) and `fdl libtorch list|info` have a budget of their own below: what
they use is allowed, what only other commands need is named with its cost. About 3 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "manifest-project"

# module -> what it costs (ms, -X importtime on the CI machine) and why it is not needed
HEAVY = {
    "yaml": "13 ms: PyYAML's whole package; an unchanged manifest or table comes from its cache",
    "typer": "50 ms: the short answers are parsed by fdl.cli itself",
    "click": "25 ms: as typer",
    "dataclasses": "11 ms (inspect, ast, dis): plain classes on the start-up path",
    "typing": "4 ms: annotations only, under TYPE_CHECKING",
    "inspect": "6 ms: pulled by dataclasses and typer",
    "hashlib": "3.4 ms (OpenSSL): digests only where files are fetched",
    "shutil": "3 ms (bz2, lzma): copies only where trees are copied",
    "tempfile": "4 ms (random, shutil): atomic writes only where fdl writes",
    "platformdirs": "9 ms: the cache directory's usual answer is computed directly",
    "subprocess": "5 ms (selectors, threading): nothing is run",
    "threading": "2 ms",
    "datetime": "2 ms",
    "shlex": "1 ms: only the resolver quotes",
    "contextlib": "1 ms",
    "requests": "80 ms: no network",
    "docker": "100 ms: no engine",
    "jinja2": "40 ms: no templates",
    "fdl.compat": "tables: no libtorch planning",
    "fdl.tasks._resolve": "the resolver (dataclasses): --help lists commands without it",
}
# json is fine where the answer is JSON, and in explain's text (a list value is shown as
# JSON); the others have no use for it
JSON = {"json": "2 ms: only --json answers and explain's values are JSON"}

COMMANDS = [
    (["version"], JSON),
    (["--version"], JSON),
    (["--help"], JSON),
    (["--env", "ci", "config", "show"], JSON),
    (["--env", "ci", "config", "show", "--json"], {}),
    (["--env", "ci", "config", "explain"], {}),
    (["config", "explain", "commands.test"], {}),
]

PROBE = r"""
import sys, traceback
REPO = sys.argv.pop(1)
WATCHED = set(sys.argv.pop(1).split(","))
seen = {}

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED and name not in seen:
            frames = [f for f in traceback.extract_stack()[:-1]
                      if f.filename.startswith(REPO + "/fdl/")]
            seen[name] = (
                f"{frames[-1].filename[len(REPO) + 1:]}:{frames[-1].lineno}" if frames else "?"
            )
        return None

sys.meta_path.insert(0, Recorder())
import re  # the console script imports it before fdl (pip's and uv's both do)
from fdl.cli import main
code = main(sys.argv[1:])
for name, where in sorted(seen.items()):
    print(f"IMPORTED {name} {where}", file=sys.stderr)
raise SystemExit(code)
"""


def _imported(
    project: Path,
    args: list[str],
    watched: dict[str, str],
    extra: dict[str, str] | None = None,
    probe: str = PROBE,
) -> dict[str, str]:
    env = dict(
        os.environ, PYTHONPATH=str(REPO), NO_COLOR="1", FDL_CACHE_DIR=str(project.parent / "cache")
    )
    env.pop("FDL_MANIFEST_CACHE", None)
    env.pop("FDL_PLAN_CACHE", None)
    env.update(extra or {})
    argv = [sys.executable, "-c", probe, str(REPO), ",".join(watched), *args]
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split() for line in proc.stderr.splitlines() if line.startswith("IMPORTED ")]
    return {name: where for _, name, where in lines}


# Project commands (`fdl test`, `fdl train -- ...`, their dry runs) and `fdl libtorch
# list|info` are what people run most after the short answers (issue 36: about 160 and
# 220 ms before, floDl's CLI 12 ms). They may use dataclasses (their plans and records
# are dataclasses); they must not load what only other commands need. Costs: cumulative
# ms under -X importtime on a 2-core CI machine, as loaded by these commands before they
# were cut.
PROJECT_HEAVY = {
    "fdl.compat": "19-23 ms (its modules): the framework check loads them only when a "
    "Cargo.lock, Cargo.toml or CMakeLists.txt names a framework",
    "fdl.runner": "18 ms (subprocess, threading): a dry run runs nothing",
    "fdl.libtorch.variants": "4 ms: read only when a variant is active or listed",
    "fdl.tasks._probe": "5 ms (hashlib): an entry's schema probe; a `run:` command has none",
    "fdl.tasks._args": "3 ms: an entry's schema",
    "fdl.tasks._presets": "2 ms (json): an entry's presets",
    "fdl.tasks._compose_file": "2 ms: the compose file's reader, for `docker:` commands",
    "fdl.diagnose": "59 ms (system probe, binaries, install machinery): nothing is checked",
    "fdl.libtorch.build": "24 ms: the source builder (`libtorch build` takes its options "
    "from the manifest's settings table)",
    "fdl.system": "11 ms (concurrent.futures, logging): no machine probe",
    "fdl.binaries": "5 ms: no binary is read",
    "platform": "2 ms: no platform question",
    # a floDl project's check reads the frameworks' and releases' tables, no other
    "fdl.compat.downloads": "3 ms (platform): official zips' URLs",
    "fdl.compat.build": "2-5 ms: source-build switches",
    "fdl.compat.runtime": "1 ms: a CUDA libtorch's run-time libraries",
}
# what these commands use: the resolver and its plans (dataclasses, which import inspect);
# an entry's schema, presets and probe cache (`train` is an entry; typing); for `libtorch
# list|info` (answered without typer), the variants' records
RESOLVER = {"fdl.tasks._resolve", "shlex", "dataclasses", "inspect", "json"}
ENTRY = {"fdl.tasks._args", "fdl.tasks._presets", "fdl.tasks._probe", "typing"}
VARIANTS = {"fdl.libtorch.variants", "dataclasses", "inspect", "json"}
PROJECT_COMMANDS = [
    (["--env", "ci", "test", "--dry-run"], RESOLVER),
    # a real run: the runner (subprocess, threading; typing for its Protocol)
    (["noop"], RESOLVER | {"subprocess", "threading", "fdl.runner", "typing"}),
    (["train", "--dry-run", "--", "--epochs", "3"], RESOLVER | ENTRY),
]
# a floDl project (Cargo.lock names flodl 0.5.3): its framework check reads two tables,
# parsed by an earlier run (fdl.compat._data keeps them; its modules use typing), and the
# Cargo files (tomllib, which imports datetime)
FLODL = RESOLVER | {"fdl.compat", "typing", "tomllib", "datetime"}
FLODL_COMMANDS = [
    (["--env", "ci", "test", "--dry-run"], FLODL),
    (["noop"], FLODL | {"subprocess", "threading", "fdl.runner"}),
    # in its compose service (docker: dev): what it read of the compose file is kept, under
    # the digest of its text (hashlib)
    (["test", "--dry-run"], FLODL | {"fdl.tasks._compose_file", "hashlib"}),
]
LIBTORCH_COMMANDS = [
    (["libtorch", "list"], VARIANTS),
    (["libtorch", "list", "--json"], VARIANTS),
    (["libtorch", "info"], VARIANTS),
]


def _what_was_imported(args: list[str], found: dict[str, str], watched: dict[str, str]) -> str:
    """The failure: each module, the line of fdl that imported it, and what it costs."""
    return "\n".join(
        [f"`fdl {' '.join(args)}` imported modules its answer does not need:"]
        + [
            f"  {name}, imported by {where} (costs {watched[name]})"
            for name, where in found.items()
        ]
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 3-layer example (with a nested manifest), its parse cache filled by one run."""
    root = tmp_path_factory.mktemp("budget") / "p"
    shutil.copytree(FIXTURE, root)
    _imported(root, ["--help"], {})
    _imported(root, ["--env", "ci", "config", "show"], {})
    return root


@pytest.mark.parametrize(
    ("args", "allowed_extra"), COMMANDS, ids=lambda a: " ".join(a) if isinstance(a, list) else ""
)
def test_short_answers_import_nothing_heavy(
    project: Path, args: list[str], allowed_extra: dict[str, str]
) -> None:
    watched = {**HEAVY, **allowed_extra}
    found = _imported(project, args, watched)
    assert not found, _what_was_imported(args, found, watched)


def test_the_budget_names_the_line_that_broke_it(project: Path) -> None:
    """The recorder itself: `config layers` is not a short answer (typer parses it), and the
    recorder says which line of fdl imported typer."""
    found = _imported(project, ["config", "layers"], HEAVY)
    assert found.get("typer", "").startswith("fdl/cli/__init__.py:"), found


@pytest.fixture(scope="module")
def busy_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example with a command that does nothing (`noop`, `run: "true"`) and, in a copy
    of its own, an active libtorch variant."""
    root = tmp_path_factory.mktemp("budget-project") / "p"
    shutil.copytree(FIXTURE, root)
    with (root / "fdl.yml").open("a", encoding="utf-8") as manifest:
        manifest.write('  noop:\n    description: does nothing\n    run: "true"\n')
    return root


@pytest.fixture(scope="module")
def flodl_project(busy_project: Path) -> Path:
    root = busy_project.parent / "flodl"
    shutil.copytree(busy_project, root)
    (root / "Cargo.toml").write_text(
        '[package]\nname = "app"\nversion = "0.1.0"\n\n[dependencies]\nflodl = "0.5.3"\n'
    )
    (root / "docker-compose.yml").write_text(
        "services:\n  dev:\n    image: app-dev\n    volumes:\n      - .:/workspace\n"
    )
    packages = [("app", "0.1.0"), ("flodl", "0.5.3"), ("flodl-sys", "0.5.3")]
    (root / "Cargo.lock").write_text(
        "version = 4\n"
        + "".join(f'\n[[package]]\nname = "{n}"\nversion = "{v}"\n' for n, v in packages)
    )
    return root


@pytest.fixture(scope="module")
def with_variant(busy_project: Path) -> Path:
    from tests.support.libtorch_trees import make_tree

    root = busy_project.parent / "with-variant"
    shutil.copytree(busy_project, root)
    lib = root / "libtorch" / "precompiled" / "cpu"
    make_tree(lib, "2.10.0+cpu")
    (lib / ".arch").write_text("cuda=none\ntorch=2.10.0\narchs=cpu\n")
    (root / "libtorch" / ".active").write_text("precompiled/cpu")
    return root


def _budget(used: set[str]) -> dict[str, str]:
    return {
        name: cost for name, cost in {**HEAVY, **JSON, **PROJECT_HEAVY}.items() if name not in used
    }


@pytest.mark.parametrize(
    ("kind", "args", "used"),
    [("example", *row) for row in PROJECT_COMMANDS]
    + [("flodl", *row) for row in FLODL_COMMANDS]
    + [("variant", *row) for row in LIBTORCH_COMMANDS],
    ids=lambda a: " ".join(sorted(a)) if isinstance(a, (list, set)) else a,
)
def test_project_commands_and_libtorch_list_import_what_they_use(
    request: pytest.FixtureRequest, kind: str, args: list[str], used: set[str]
) -> None:
    """A project command (its dry run, and a real run of `true`) and `libtorch list|info`
    load nothing beyond their own work: what they do not use is named with its cost."""
    watched = _budget(used)
    fixture = {"example": "busy_project", "flodl": "flodl_project", "variant": "with_variant"}
    where = request.getfixturevalue(fixture[kind])
    _imported(where, args, {})  # as people run them: the manifest's parse cache filled
    found = _imported(where, args, watched)
    assert not found, _what_was_imported(args, found, watched)


# A project command run again as before (nothing it read has changed) replays its kept plan
# (fdl.tasks._replay, issue 44: a host command within 2.5x Python's start, a docker: one
# within 3x plus its one docker call): fdl's own process (main() on sys.argv, as the
# console script runs it), the foreground runner (subprocess, threading, contextlib) and
# nothing of the planner. Costs: ms under -X importtime on a 2-core machine, loaded by
# these commands before the replay.
REPLAY_PROBE = PROBE.replace("code = main(sys.argv[1:])", "code = main()")
REPLAY_HEAVY = {
    **HEAVY,
    **JSON,
    **PROJECT_HEAVY,
    "fdl.tasks._plan": "7 ms (its modules): the planner; the kept plan is the answer",
    "fdl.tasks._prepare": "the planner's entry",
    "fdl.manifest": "3 ms: the manifest's layers; their files' signatures say it is unchanged",
    "fdl.cli._session": "the session (pathlib)",
    "pathlib": "3.5 ms (urllib.parse, ipaddress): paths are strings here",
    "fdl.engine": "the engine; compose's argv is in the kept plan",
    "fdl.runner": "9 ms (typing): the foreground runner is used directly",
}
for _used in ("subprocess", "threading", "contextlib"):  # the foreground runner's
    REPLAY_HEAVY.pop(_used)


@pytest.fixture(scope="module")
def docker_project(busy_project: Path) -> tuple[Path, dict[str, str]]:
    """The example with a `docker: dev` command, a compose file and a fake docker first on
    PATH (the engine's answers kept by its first run), and its environment."""
    from tests.support.fake_docker import make_fake_docker

    root = busy_project.parent / "docker"
    shutil.copytree(busy_project, root)
    with (root / "fdl.yml").open("a", encoding="utf-8") as manifest:
        manifest.write("  hi:\n    run: echo hi\n    docker: dev\n")
    (root / "docker-compose.yml").write_text(
        "services:\n  dev:\n    image: debian\n    volumes: ['.:/workspace']\n"
    )
    fake = make_fake_docker(busy_project.parent / "fake-docker", buildx=True, compose=True)
    path = os.pathsep.join([str(fake.folder), os.environ.get("PATH", "")])
    return root, {"PATH": path, "FDL_IN_CONTAINER": "0", "FDL_COMPOSE": ""}


@pytest.mark.parametrize("kind", ["host", "docker"])
def test_a_replayed_project_command_imports_nothing_of_the_planner(
    request: pytest.FixtureRequest, kind: str
) -> None:
    if kind == "host":
        where, extra, args = request.getfixturevalue("busy_project"), {}, ["noop"]
    else:
        (where, extra), args = request.getfixturevalue("docker_project"), ["hi"]
    for _ in range(2):  # the parse cache and the engine's answers, then the plan kept
        _imported(where, args, {}, extra, REPLAY_PROBE)
    found = _imported(where, args, REPLAY_HEAVY, extra, REPLAY_PROBE)
    assert not found, _what_was_imported(args, found, REPLAY_HEAVY)
