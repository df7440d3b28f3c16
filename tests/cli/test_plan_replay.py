"""A project command's kept plan (fdl.tasks._replay, issue 44 part 3): the next identical
run replays it without the planner, with the same argv, directory, environment, messages
and exit status; anything planning read that changes since, a damaged entry, or a planning
run that asked a program is the normal path again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.libtorch_trees import make_tree

# fdl as its console script runs it (main() on sys.argv: fdl's own process), then whether
# the planner was loaded: the replay never imports it
PROBE = """
import sys
from fdl.cli import main
code = main()
print("PLANNED" if "fdl.tasks._plan" in sys.modules else "REPLAYED", file=sys.stderr)
raise SystemExit(code)
"""
MANIFEST = "libtorch: {}\ncommands:\n  show:\n    run: env | sort > env.out; exit 3\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    (root / "fdl.yml").write_text(MANIFEST)
    (root / "fdl.ci.yml").write_text("commands:\n  show:\n    run: echo ci > env.out\n")
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    keep = ("PATH", "LANG", "SYSTEMROOT")
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
        "HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_IN_CONTAINER": "0",
    }


def _fdl(project: Path, env: dict[str, str], *args: str) -> tuple[int, str, str, str]:
    """(exit status, how it ran, stderr without that line, what the command wrote)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    *said, how = proc.stderr.splitlines()
    out = project / "env.out"
    return proc.returncode, how, "\n".join(said), out.read_text() if out.exists() else ""


def _kept_twice(project: Path, env: dict[str, str]) -> tuple[int, str, str, str]:
    """The first run writes the parse cache (nothing kept while a file it read changes),
    the second keeps its plan: its result."""
    _fdl(project, env, "show")
    second = _fdl(project, env, "show")
    assert second[1] == "PLANNED"
    return second


def test_the_replay_runs_what_the_planner_ran(project: Path, env: dict[str, str]) -> None:
    planned = _kept_twice(project, env)
    assert planned[0] == 3
    assert "note: no active libtorch variant" in planned[2]
    for _ in range(2):
        replayed = _fdl(project, env, "show")
        assert replayed[1] == "REPLAYED"
        # the same exit status, notes and environment (FDL_PROJECT_ROOT, HOSTNAME, ...)
        assert (replayed[0], replayed[2], replayed[3]) == (planned[0], planned[2], planned[3])
    assert "FDL_PROJECT_ROOT=" in planned[3]


def test_another_command_line_or_environment_is_planned(project: Path, env) -> None:
    _kept_twice(project, env)
    assert _fdl(project, env, "show", "extra")[1] == "PLANNED"
    assert _fdl(project, {**env, "SOMETHING": "else"}, "show")[1] == "PLANNED"
    assert _fdl(project, {**env, "FDL_PLAN_CACHE": "0"}, "show")[1] == "PLANNED"
    assert _fdl(project, env, "show")[1] == "REPLAYED"  # each kept beside the others
    selected = _fdl(project, {**env, "FDL_ENV": "ci"}, "show")
    assert selected[1] == "PLANNED" and selected[3] == "ci\n"


@pytest.mark.parametrize(
    "change", ["manifest edited", "inherited file edited", "variant activated", "cwd's parent"]
)
def test_what_planning_read_changing_is_planned_again(
    project: Path, env: dict[str, str], tmp_path: Path, change: str
) -> None:
    _kept_twice(project, env)
    assert _fdl(project, env, "show")[1] == "REPLAYED"
    if change == "manifest edited":
        (project / "fdl.yml").write_text(MANIFEST.replace("exit 3", "exit 4"))
        expected = 4
    elif change == "inherited file edited":
        (project / "common.yml").write_text("commands:\n  show:\n    run: exit 5\n")
        (project / "fdl.yml").write_text("inherit-from: common.yml\n" + MANIFEST)
        _kept_twice(project, env)
        assert _fdl(project, env, "show")[1] == "REPLAYED"
        (project / "common.yml").write_text("commands:\n  show:\n    run: exit 5\n  x: {}\n")
        expected = 3  # the project's own `show` wins
    elif change == "variant activated":
        lib = project / "libtorch" / "precompiled" / "cpu"
        make_tree(lib, "2.10.0+cpu")
        (lib / ".arch").write_text("cuda=none\ntorch=2.10.0\narchs=cpu\n")
        (project / "libtorch" / ".active").write_text("precompiled/cpu")
        expected = 3
    else:  # a manifest above the project's: the project is found the same way
        (tmp_path / "fdl.yml").write_text("commands: {}\n")
        expected = 3
    code, how, said, out = _fdl(project, env, "show")
    assert (how, code) == ("PLANNED", expected), said
    if change == "variant activated":
        assert f"LIBTORCH={lib}" in out and "no active libtorch" not in said


@pytest.mark.parametrize("damage", ["garbage", "truncated", "link", "fifo", "empty"])
def test_a_damaged_kept_plan_is_planned_again(
    project: Path, env: dict[str, str], tmp_path: Path, damage: str
) -> None:
    planned = _kept_twice(project, env)
    [entry] = (tmp_path / "cache" / "plans").glob("*.marshal")
    good = entry.read_bytes()
    entry.unlink()
    if damage == "garbage":
        entry.write_bytes(b"\xff\xfe{[[[" * 10)
    elif damage == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "link":
        (tmp_path / "elsewhere").write_bytes(good)
        entry.symlink_to(tmp_path / "elsewhere")
    elif damage == "fifo":
        os.mkfifo(entry)
    else:
        entry.write_bytes(b"")
    again = _fdl(project, env, "show")
    assert again[1] == "PLANNED"
    assert (again[0], again[2], again[3]) == (planned[0], planned[2], planned[3])
    assert entry.is_file() and not entry.is_symlink()  # rewritten by that run
    assert _fdl(project, env, "show")[1] == "REPLAYED"


def test_a_sigterm_ends_a_replayed_command_and_its_group(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    go, pid = tmp_path / "go", tmp_path / "pid"
    (project / "fdl.yml").write_text(
        f"commands:\n  wait:\n    run: 'if [ -f {go} ]; then echo $$ > {pid}; exec sleep 300; fi'\n"
    )
    for _ in range(2):
        _fdl(project, env, "wait")
    go.write_text("")
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE, "wait"], cwd=project, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (pid.exists() and pid.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert stderr.splitlines()[-1] == "REPLAYED"
    with pytest.raises(ProcessLookupError):  # reaped before fdl returned
        os.kill(int(pid.read_text()), 0)


@pytest.mark.parametrize(
    "variables",
    [
        {"FDL_CACHE_DIR": "/x/cache"},
        {"FDL_CACHE_DIR": "~/c"},
        {"XDG_CACHE_HOME": "/xdg"},
        {"HOME": "/home/u"},
    ],
)
def test_the_replay_finds_the_cache_where_fdl_keeps_it(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    from fdl._recorded import _cache_dir
    from fdl.paths import cache_dir

    for name in ("FDL_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert _cache_dir(os.environ) == str(cache_dir())


# `config show` and `config explain` in fdl's own process: what an identical earlier run
# wrote is written again while nothing it read has changed (fdl._recorded)
SHOW = """
import sys
from fdl.cli import main
code = main()
print("ANSWERED" if "fdl.manifest" not in sys.modules else "WORKED", file=sys.stderr)
raise SystemExit(code)
"""


def _show(project: Path, env: dict[str, str], *args: str) -> tuple[int, str, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", SHOW, *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    *said, how = proc.stderr.splitlines()
    return proc.returncode, how, proc.stdout, "\n".join(said)


@pytest.mark.parametrize(
    "args", [["config", "show"], ["--env", "ci", "config", "explain"], ["config", "show", "--json"]]
)
def test_config_answers_are_given_again_until_the_manifest_changes(
    project: Path, env: dict[str, str], args: list[str]
) -> None:
    first = [_show(project, env, *args) for _ in range(2)][-1]
    assert first[1] == "WORKED" and first[0] == 0
    again = _show(project, env, *args)
    assert again == (first[0], "ANSWERED", first[2], first[3])
    assert _show(project, {**env, "FDL__DESCRIPTION": "x"}, *args)[1] == "WORKED"
    (project / "fdl.yml").write_text(MANIFEST.replace("exit 3", "exit 4"))
    edited = _show(project, env, *args)
    assert edited[1] == "WORKED" and edited[2] != first[2]


def test_shown_secrets_are_never_kept(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    (project / "fdl.yml").write_text(
        MANIFEST + "images:\n  train:\n    env:\n      DB_PASSWORD: s3cr3t-value\n"
    )
    assert "s3cr3t-value" not in [_show(project, env, "config", "show") for _ in range(3)][-1][2]
    for _ in range(3):
        shown = _show(project, env, "config", "show", "--show-secrets")
        assert shown[1] == "WORKED" and "s3cr3t-value" in shown[2], shown
    for kept in (tmp_path / "cache").rglob("*.marshal"):
        if kept.parent.name == "plans":
            assert b"s3cr3t-value" not in kept.read_bytes()


@pytest.mark.parametrize(
    "args",
    [["show", "--dry-run"], ["--env", "ci", "show"], ["-v", "show"], ["-q", "show"]],
    ids=" ".join,
)
def test_global_options_and_dry_runs_are_replayed_as_planned(
    project: Path, env: dict[str, str], args: list[str]
) -> None:
    """A dry run writes what its planned twin wrote; global options are part of the key and
    of what is replayed (-v's `running` line, -q's FDL_VERBOSITY, --env's overlay)."""
    planned = [_fdl(project, env, *args) for _ in range(2)][-1]
    assert planned[1] == "PLANNED"
    out = project / "env.out"
    if out.exists():  # rewritten by the replay (no new entry: the directory is as it was read)
        out.write_text("")
    replayed = _fdl(project, env, *args)
    assert replayed[1] == "REPLAYED"
    assert (replayed[0], replayed[2], replayed[3]) == (planned[0], planned[2], planned[3])
    if args[0] == "-v":
        assert "fdl: running sh -c" in replayed[2]
    if args[0] == "-q":
        assert "FDL_VERBOSITY=0" in replayed[3]
