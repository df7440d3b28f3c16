"""Tables older than $FDL_COMPAT_MAX_AGE_DAYS and PyPI (a fake one on loopback) has a newer
torch: a command that picks the newest release itself says so, keeps its plan on the
tables, asks PyPI at most once a day; offline, no error and no wait beyond the timeouts
(about 3 s)."""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from fdl.cli import _newer
from fdl.compat import releases, tables_reviewed
from tests.support.fake_pypi import publish
from tests.support.faulty_http import FaultyServer

REVIEWED = datetime.date.fromisoformat(tables_reviewed())


@pytest.fixture
def pypi() -> Iterator[FaultyServer]:
    with FaultyServer() as server:
        publish(server)
        yield server


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch):
    """The day the command runs on, as days after the tables' review."""

    class Clock:
        days = 40

    monkeypatch.setattr(_newer, "_today", lambda: REVIEWED + datetime.timedelta(Clock.days))
    return Clock


@pytest.fixture
def fdl(run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pypi: FaultyServer):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FDL_COMPAT_MAX_AGE_DAYS", raising=False)

    class Machine:
        env: ClassVar[dict[str, str]] = {
            "FDL_HOME": str(tmp_path / "home"),
            "FDL_CACHE_DIR": str(tmp_path / "cache"),
            "FDL_PYPI_URL": pypi.url("/pypi"),
            "FDL_NVML": "0",
            "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",  # no nvidia-smi
        }

    def invoke(*args: str, env: dict[str, str] | None = None):
        return run_fdl(list(args), cwd=work, env={**Machine.env, **(env or {})})

    return invoke


LATEST = releases()[-1].latest


def test_stale_tables_and_a_newer_release_on_pypi_are_said_once_a_day(
    fdl, clock, pypi: FaultyServer
) -> None:
    result = fdl("libtorch", "download", "--cpu", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["torch"] == LATEST  # the plan stays on the tables
    note = result.stderr
    assert f"reviewed on {REVIEWED} (40 days ago) and PyPI has torch 2.16.0" in note
    assert "--torch 2.16.0" in note and "FDL_COMPAT_MAX_AGE_DAYS=0" in note
    assert len(pypi.requests_to("/pypi/torch/json")) == 1
    again = fdl("libtorch", "download", "--cpu", "--dry-run")
    assert "PyPI has torch 2.16.0" in again.stderr
    assert len(pypi.requests_to("/pypi/torch/json")) == 1  # the day's answer was kept
    clock.days = 41
    fdl("libtorch", "download", "--cpu", "--dry-run")
    assert len(pypi.requests_to("/pypi/torch/json")) == 2  # a new day: asked again


def test_a_named_release_fresh_tables_or_the_check_off_ask_nothing(
    fdl, clock, pypi: FaultyServer
) -> None:
    named = fdl("libtorch", "download", "--cpu", "--torch", LATEST, "--dry-run")
    assert named.exit_code == 0 and "PyPI has" not in named.stderr
    off = fdl("libtorch", "download", "--cpu", "--dry-run", env={"FDL_COMPAT_MAX_AGE_DAYS": "0"})
    assert off.exit_code == 0 and "PyPI has" not in off.stderr
    clock.days = 30
    fresh = fdl("libtorch", "download", "--cpu", "--dry-run")
    assert fresh.exit_code == 0 and "PyPI has" not in fresh.stderr
    assert pypi.requests_to("/pypi/torch/json") == []
    bad = fdl("libtorch", "download", "--cpu", "--dry-run", env={"FDL_COMPAT_MAX_AGE_DAYS": "x"})
    assert bad.exit_code == 2 and "FDL_COMPAT_MAX_AGE_DAYS='x'" in bad.stderr


def test_offline_no_error_no_wait_and_not_asked_again_that_day(
    fdl, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fdl import net

    asked: list[tuple[str, float | None]] = []
    read_range = net.read_range

    def counted(url: str, start: int, length: int | None = None, *, timeout=None):
        asked.append((url, timeout))
        return read_range(url, start, length, timeout=timeout)

    monkeypatch.setattr(net, "read_range", counted)
    offline = {"FDL_PYPI_URL": "http://127.0.0.1:9/pypi"}
    result = fdl("setup", "--dry-run", env=offline)
    assert result.exit_code == 0, result.output
    assert f"--torch {LATEST}" in result.stdout  # the plan, made from the tables
    assert "PyPI has" not in result.stderr and "Traceback" not in result.output
    # asked once, with the short timeout (no retries, no default 15 s / 120 s waits)
    assert asked == [("http://127.0.0.1:9/pypi/torch/json", _newer.TIMEOUT_S)]
    kept = json.loads(
        (Path(os.environ["FDL_CACHE_DIR"]) / "compat" / "pypi-torch.json").read_text()
    )
    assert kept["newest"] is None and kept["checked_on"] == str(REVIEWED + datetime.timedelta(40))
    again = fdl("setup", "--dry-run", env=offline)
    assert again.exit_code == 0, again.output
    assert len(asked) == 1  # not asked again that day


@pytest.mark.parametrize(
    "body", [b"[" * 200_000 + b"]" * 200_000, b'["a list"]'], ids=["nested 200k deep", "a list"]
)
def test_a_pypi_answering_nonsense_is_no_note_and_no_error(
    fdl, clock, pypi: FaultyServer, body: bytes
) -> None:
    """The stale-tables check reads PyPI's answer as nothing (no note) when it is not a
    project's JSON: the command goes on (it was exit 70 for a deeply nested answer)."""
    pypi.add("/pypi/torch/json", body, content_type="application/json")
    result = fdl("libtorch", "download", "--cpu", "--dry-run")
    assert result.exit_code == 0, result.output
    assert LATEST in result.stdout  # the plan, on the tables
    assert len(pypi.requests_to("/pypi/torch/json")) == 1  # the nonsense was read
    assert "PyPI has" not in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    "damage", ["fifo", "garbage", "5000 digits", "a list", "escapes"], ids=lambda d: d
)
def test_a_damaged_cache_of_the_day_s_answer_is_a_miss(
    fdl, clock, pypi: FaultyServer, tmp_path: Path, damage: str
) -> None:
    """Issue 42, 4: the day's answer kept in the cache, damaged or crafted, is asked again
    (it was exit 70: a FIFO, a "newest" that is no version)."""
    cache = tmp_path / "cache" / "compat" / "pypi-torch.json"
    cache.parent.mkdir(parents=True)
    today = str(REVIEWED + datetime.timedelta(40))
    newest = {"garbage": "garbage", "5000 digits": "1" * 5000, "a list": [1, 2]}.get(
        damage, "2.99.0\x1b]0;pwned\x07"
    )
    if damage == "fifo":
        os.mkfifo(cache)
    else:
        cache.write_text(json.dumps({"checked_on": today, "newest": newest}))
    result = fdl("libtorch", "download", "--cpu", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "PyPI has torch 2.16.0" in result.stderr  # asked again, said
    assert len(pypi.requests_to("/pypi/torch/json")) == 1
