"""A `docker:` project command calls docker once after the first run: what the probes learn is
kept per engine in fdl's cache (issue 44), asked anew when the engine changes, and a failure of
`compose run` itself still says what is wrong with the engine, with the fix."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_fdl_process

# A docker CLI whose state (up, down: no daemon, nocompose: the plugin removed) is a file
# beside it, so it can change without the binary changing; it logs every call.
FAKE = """#!/bin/sh
dir={dir}
{{ printf '%s' "$*" | tr '\\n' ' '; echo; }} >> "$dir/calls"
state=$(cat "$dir/state" 2>/dev/null || echo up)
case "$state:$1" in
  *:--version) echo "Docker version 27.5.1, build fake"; exit 0 ;;
  garbage:version) echo "{{not json"; exit 0 ;;
  hang:version) exec sleep 60 ;;
  down:version) echo '{{"Client":{{"Version":"27.5.1"}},"Server":null}}'
    echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2
    exit 1 ;;
  *:version) echo '{{"Client":{{"Version":"27.5.1"}},"Server":{{"Version":"27.5.1"}}}}'; exit 0 ;;
  *:buildx) echo "github.com/docker/buildx v0.19.3 fake"; exit 0 ;;
  nocompose:compose) echo "docker: 'compose' is not a docker command." >&2; exit 1 ;;
  *:compose)
    if [ "$2" = version ]; then echo "Docker Compose version v2.32.1"; exit 0; fi
    if [ "$state" = down ]; then
      echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1
    fi
    echo "ran in {name}"
    exit "$(cat "$dir/rc" 2>/dev/null || echo 0)" ;;
esac
exit 1
"""

COMPOSE_RUN = "compose run"


def _fake(folder: Path, name: str = "dev") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    docker = folder / "docker"
    docker.write_text(FAKE.format(dir=shlex.quote(str(folder)), name=name))
    docker.chmod(0o755)
    return docker


def _calls(folder: Path) -> list[str]:
    log = folder / "calls"
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [" ".join(call.split()[:2]) for call in calls]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    (root / "fdl.yml").write_text("commands:\n  hi:\n    run: echo hi\n    docker: dev\n")
    (root / "docker-compose.yml").write_text(
        "services:\n  dev:\n    image: debian\n    volumes: ['.:/workspace']\n"
    )
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    # only the fake docker and what its script needs: no other docker or docker-compose
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("sh", "cat", "tr", "sleep"):
        found = shutil.which(name)
        assert found is not None, name
        (tools / name).symlink_to(found)
    return {
        "FDL_IN_CONTAINER": "0",
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{tools}",
        "HOME": str(home),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_DOCKER": "",
        "DOCKER_HOST": "",
        "DOCKER_CONTEXT": "",
    }


def _records(env: dict[str, str]) -> list[Path]:
    folder = Path(env["FDL_CACHE_DIR"]) / "engine-probes"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _hi(project: Path, env: dict[str, str], **extra: str):
    return run_fdl_process(["hi"], cwd=project, env={**env, **extra}, timeout=60)


def test_the_second_run_calls_docker_once(project: Path, env, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    first = _hi(project, env)
    assert first.exit_code == 0, first.output
    assert "ran in dev" in first.stdout
    assert _calls(bin_dir) == ["version --format", "buildx version", "compose version", COMPOSE_RUN]
    for _ in range(2):
        again = _hi(project, env)
        assert again.exit_code == 0, again.output
        assert "ran in dev" in again.stdout
        assert _calls(bin_dir) == [COMPOSE_RUN]


@pytest.mark.parametrize(
    "change",
    [
        "another binary first on PATH",
        "the binary replaced",
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "docker context use",
    ],
)
@pytest.mark.parametrize("runs", [1, 3], ids=["after one run", "after a replayed run"])
def test_another_engine_is_asked_anew(
    project: Path, env, tmp_path: Path, change: str, runs: int
) -> None:
    """Also once the command's plan is kept and replayed (fdl.tasks._replay: the third run
    calls docker once, `compose run`, without the planner): what the replay depends on
    includes what the probes' memory is keyed on."""
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    for _ in range(runs):
        assert _hi(project, env).exit_code == 0
    assert _calls(bin_dir)[-1] == COMPOSE_RUN
    extra: dict[str, str] = {}
    asked = bin_dir
    if change == "another binary first on PATH":
        asked = tmp_path / "other"
        _fake(asked, name="other")
        extra["PATH"] = f"{asked}{os.pathsep}{env['PATH']}"
    elif change == "the binary replaced":
        (bin_dir / "docker").write_text(FAKE.format(dir=shlex.quote(str(bin_dir)), name="new"))
    elif change == "DOCKER_HOST":
        extra["DOCKER_HOST"] = "unix:///run/other.sock"
    elif change == "DOCKER_CONTEXT":
        extra["DOCKER_CONTEXT"] = "remote"
    else:
        config = Path(env["HOME"]) / ".docker" / "config.json"
        config.parent.mkdir()
        config.write_text('{"currentContext": "remote"}\n')
    result = _hi(project, env, **extra)
    assert result.exit_code == 0, result.output
    assert _calls(asked)[:3] == ["version --format", "buildx version", "compose version"]
    again = _hi(project, env, **extra)
    assert again.exit_code == 0, again.output
    assert _calls(asked) == [COMPOSE_RUN]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "link", "fifo", "wrong key"])
def test_a_damaged_record_is_ignored_and_rewritten(
    project: Path, env, tmp_path: Path, damage: str
) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    assert _hi(project, env).exit_code == 0
    _calls(bin_dir)
    [record] = _records(env)
    good = record.read_text()
    record.unlink()
    if damage == "garbage":
        record.write_bytes(b"\xff\xfe{[[[")
    elif damage == "truncated":
        record.write_text(good[: len(good) // 2])
    elif damage == "link":
        target = tmp_path / "elsewhere.json"
        target.write_text(good)
        record.symlink_to(target)
    elif damage == "fifo":
        os.mkfifo(record)
    else:
        record.write_text(good.replace('"key": "', '"key": "x', 1))
    result = _hi(project, env)
    assert result.exit_code == 0, result.output
    assert _calls(bin_dir) == ["version --format", "buildx version", "compose version", COMPOSE_RUN]
    assert record.is_file() and not record.is_symlink()
    assert record.read_text() == good
    if damage == "link":
        assert (tmp_path / "elsewhere.json").read_text() == good  # not written through
    assert _hi(project, env).exit_code == 0
    assert _calls(bin_dir) == [COMPOSE_RUN]


def test_a_daemon_stopped_since_is_said_with_the_fix(project: Path, env, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    assert _hi(project, env).exit_code == 0
    _calls(bin_dir)
    (bin_dir / "state").write_text("down\n")
    result = _hi(project, env)
    assert result.exit_code == 4, result.output
    assert "no docker daemon answers" in result.stderr
    assert "Cannot connect to the Docker daemon" in result.stderr
    assert "start the daemon" in result.stderr
    assert _calls(bin_dir)[:2] == [COMPOSE_RUN, "version --format"]
    assert _records(env) == []  # nothing kept: the next run asks first
    (bin_dir / "state").write_text("up\n")
    assert _hi(project, env).exit_code == 0
    assert _calls(bin_dir) == ["version --format", "buildx version", "compose version", COMPOSE_RUN]


def test_a_compose_plugin_removed_since_is_said_with_the_fix(
    project: Path, env, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    assert _hi(project, env).exit_code == 0
    (bin_dir / "state").write_text("nocompose\n")
    result = _hi(project, env)
    assert result.exit_code == 4, result.output
    assert "docker compose is not available" in result.stderr
    assert "compose" in result.stderr.split("fix:", 1)[1]


def test_the_commands_own_failure_is_its_exit_status(project: Path, env, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    assert _hi(project, env).exit_code == 0
    (bin_dir / "rc").write_text("3\n")
    _calls(bin_dir)
    result = _hi(project, env)
    assert result.exit_code == 3, result.output
    assert "ran in dev" in result.stdout
    assert "docker changed" not in result.stderr
    # asked after the failure (it might have been the engine's), found as it was
    assert _calls(bin_dir)[0] == COMPOSE_RUN
    assert _hi(project, env).exit_code == 3
    assert _calls(bin_dir)[0] == COMPOSE_RUN


def test_a_version_answer_of_garbage_is_never_kept(project: Path, env, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    (bin_dir / "state").write_text("garbage\n")
    for _ in range(2):
        result = _hi(project, env)
        assert result.exit_code == 4, result.output
        assert "no docker daemon answers" in result.stderr
        calls = _calls(bin_dir)
        assert calls[0] == "version --format"
        assert COMPOSE_RUN not in calls
    assert _records(env) == []


def test_a_version_probe_that_hangs_is_never_kept(
    project: Path,
    env,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A docker whose `version` never answers: the probe ends at its time limit (shortened
    here), the command is refused with the fix, nothing is kept, and once docker answers
    again it is asked anew (in-process: the time limit is a module constant)."""
    import fdl.engine._client as client
    from fdl.cli import main

    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    (bin_dir / "state").write_text("hang\n")
    monkeypatch.setattr(client, "PROBE_TIMEOUT", 1.0)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(project)
    assert main(["hi"]) == 4
    said = capsys.readouterr().err
    assert "no docker daemon answers" in said and "did not finish within 1 s" in said, said
    calls = _calls(bin_dir)
    assert calls[0] == "version --format" and COMPOSE_RUN not in calls
    assert _records(env) == []
    (bin_dir / "state").write_text("up\n")
    assert main(["hi"]) == 0
    assert _calls(bin_dir) == ["version --format", "buildx version", "compose version", COMPOSE_RUN]


# The import budget of a project command's second run: the compose program comes from the
# kept answers, so none of the engine's modules (probes, builds, the types' dataclasses) loads.
BUDGET = """
import sys
from fdl.cli import main
code = main(["hi"])
print("ENGINE=" + ",".join(sorted(m for m in sys.modules if m.startswith("fdl.engine."))),
      file=sys.stderr)
raise SystemExit(code)
"""


def test_the_second_run_loads_none_of_the_engines_modules(
    project: Path, env, tmp_path: Path
) -> None:
    _fake(tmp_path / "bin")
    loaded = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", BUDGET],
            cwd=project,
            env={**env, "PYTHONPATH": str(REPO), "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "ran in dev" in proc.stdout
        line = [x for x in proc.stderr.splitlines() if x.startswith("ENGINE=")][-1]
        loaded.append(set(filter(None, line[len("ENGINE=") :].split(","))))
    assert "fdl.engine._docker" in loaded[0]  # the first run asks docker
    assert loaded[1] == {"fdl.engine._memory", "fdl.engine._paths"}


COMPOSE_V1 = """#!/bin/sh
{{ printf 'docker-compose %s' "$*" | tr '\\n' ' '; echo; }} >> {dir}/calls
if [ "$1" = version ]; then echo "1.29.2"; exit 0; fi
echo "ran in v1"
"""


def test_a_docker_compose_installed_since_is_noticed_before_the_run(
    project: Path, env, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    assert _hi(project, env).exit_code == 0
    (bin_dir / "state").write_text("nocompose\n")  # and the plugin removed
    standalone = bin_dir / "docker-compose"
    standalone.write_text(COMPOSE_V1.format(dir=shlex.quote(str(bin_dir))))
    standalone.chmod(0o755)
    _calls(bin_dir)
    result = _hi(project, env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "ran in v1\n"
    calls = _calls(bin_dir)
    assert calls[:3] == ["version --format", "buildx version", "compose version"]
    assert calls[-1] == "docker-compose run"
    again = _hi(project, env)
    assert again.exit_code == 0, again.output
    assert _calls(bin_dir) == ["docker-compose run"]


def test_a_compose_change_no_file_shows_is_said_after_the_failure(
    project: Path, env, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    _fake(bin_dir)
    standalone = bin_dir / "docker-compose"
    standalone.write_text(COMPOSE_V1.format(dir=shlex.quote(str(bin_dir))))
    standalone.chmod(0o755)
    assert _hi(project, env).stdout == "ran in dev\n"  # the plugin first
    (bin_dir / "state").write_text("nocompose\n")  # gone, in a way no stat sees
    _calls(bin_dir)
    changed = _hi(project, env)
    assert changed.exit_code == 1, changed.output  # compose's own status, then the news
    assert f"compose is now `{standalone}`" in changed.stderr
    assert "run it again" in changed.stderr
    _calls(bin_dir)
    again = _hi(project, env)
    assert again.exit_code == 0, again.output
    assert again.stdout == "ran in v1\n"
    assert _calls(bin_dir) == ["docker-compose run"]
