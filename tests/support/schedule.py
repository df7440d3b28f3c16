"""Heavy test files first, so that two workers finish together (issue 44: the suite on 2 cores).

``scripts/test.sh`` runs the suite under pytest-xdist with ``--dist loadfile``: a file is the
unit a worker takes (its module fixtures, builds and servers stay in one process), and the
workers take files in collection order. Collected in path order, a 6-minute file reached
last leaves one worker running it alone. So the files are ordered by what they took in a
recorded run, heaviest first; within a file the order stays as written.

- ``tests/durations.json``: seconds per test file (setup + call + teardown of its tests), as
  recorded. A file it does not name (new since) is taken as the median file.
- ``FDL_TEST_DURATIONS_OUT=PATH``: write this run's figures there at the end (the controller
  writes them under xdist): ``FDL_TEST_DURATIONS_OUT=$PWD/tests/durations.json bash
  scripts/test.sh`` refreshes the committed record.

The order changes which worker runs a file and when, never what a test does: a serial run
keeps the written order.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from fdl._files import read_small_text

__all__ = ["DURATIONS", "file_of", "heaviest_first", "read_durations"]

DURATIONS = Path(__file__).resolve().parent.parent / "durations.json"
_MAX_BYTES = 1 << 20


def file_of(nodeid: str) -> str:
    """``tests/cli/test_x.py::test_y[1]`` -> ``tests/cli/test_x.py``."""
    return nodeid.split("::", 1)[0]


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The recorded seconds per file; an unreadable or damaged record orders nothing."""
    try:
        text = read_small_text(path, _MAX_BYTES)  # a FIFO or a device is refused, not read
        raw = json.loads(text) if text is not None else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(name): float(seconds)
        for name, seconds in raw.items()
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0
    }


def heaviest_first(nodeids: list[str], durations: dict[str, float]) -> list[int]:
    """The indexes of ``nodeids`` in run order: files by recorded seconds, heaviest first
    (ties and unknown files at the median, in their collected order); a file's tests stay
    together and in their order."""
    default = statistics.median(durations.values()) if durations else 0.0
    first_seen: dict[str, int] = {}
    for index, nodeid in enumerate(nodeids):
        first_seen.setdefault(file_of(nodeid), index)

    def key(index: int) -> tuple[float, int, int]:
        name = file_of(nodeids[index])
        return (-durations.get(name, default), first_seen[name], index)

    return sorted(range(len(nodeids)), key=key)


def _distributed(config: pytest.Config) -> bool:
    """Whether pytest-xdist runs this session (in a worker, or a controller with workers)."""
    if hasattr(config, "workerinput"):
        return True
    return bool(getattr(config.option, "numprocesses", None))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A serial run keeps the written order (what a developer reading a failure expects).
    if not _distributed(config):
        return
    order = heaviest_first([item.nodeid for item in items], read_durations())
    items[:] = [items[index] for index in order]


_SECONDS: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist the controller receives every worker's reports here too.
    _SECONDS[file_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("FDL_TEST_DURATIONS_OUT")
    if not out or hasattr(session.config, "workerinput") or not _SECONDS:
        return
    figures = {name: round(seconds, 2) for name, seconds in sorted(_SECONDS.items())}
    Path(out).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n", encoding="utf-8")
