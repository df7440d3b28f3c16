"""What the tests download, and how much, said at the end of the run (issue 44).

A helper that fetches from the network (``download_wheel``, the ranged header reads) calls
:func:`note`. The run's controller names a file in ``FDL_TEST_DOWNLOADS`` before any
pytest-xdist worker starts (they inherit it), each note appends one JSON line there, and
the terminal summary lists them with their total. Nothing cached is listed: a warm run
says "no downloads".
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from fdl._files import read_small_text

__all__ = ["VARIABLE", "note"]

VARIABLE = "FDL_TEST_DOWNLOADS"
_MADE: list[Path] = []


def note(what: str, source: str, size: int, seconds: float) -> None:
    """Record that ``what`` (``size`` bytes) came from ``source`` in ``seconds``."""
    line = json.dumps({"what": what, "source": source, "bytes": size, "seconds": seconds})
    print(
        f"[download] {what}: {size / 1e6:.1f} MB from {source} in {seconds:.1f} s", file=sys.stderr
    )
    path = os.environ.get(VARIABLE)
    if path:
        # one write of one short line with O_APPEND: two workers' lines never interleave
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(VARIABLE):
        return
    fd, name = tempfile.mkstemp(prefix="fdl-test-downloads-", suffix=".jsonl")
    os.close(fd)
    os.environ[VARIABLE] = name
    _MADE.append(Path(name))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not _MADE:
        return
    try:
        text = read_small_text(_MADE[0], 4 << 20) or ""
    except OSError:
        return
    entries = []
    for line in text.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    if not entries:
        terminalreporter.write_line("downloads: none (everything came from the tests' cache)")
        return
    terminalreporter.section("downloads this run")
    for entry in entries:
        terminalreporter.write_line(
            f"{entry['what']}: {entry['bytes'] / 1e6:.1f} MB from {entry['source']} "
            f"in {entry['seconds']:.1f} s"
        )
    total = sum(entry["bytes"] for entry in entries)
    terminalreporter.write_line(f"in all: {len(entries)} downloads, {total / 1e6:.1f} MB")


def pytest_unconfigure(config: pytest.Config) -> None:
    while _MADE:
        _MADE.pop().unlink(missing_ok=True)
        os.environ.pop(VARIABLE, None)
