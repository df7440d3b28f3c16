"""A `stress`-like load for the tests that check leftover processes or timing: what holds on
a quiet machine must hold when other work keeps every core busy (issue 44: a killed probe was
still there for a moment after fdl had exited, on a loaded machine only)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

__all__ = ["busy_cores"]

# Spins until stopped, and by itself once the test process is gone (killed by a timeout)
# or after 15 minutes, so that a load never outlives its test run.
SPIN = """
import os, time
parent, end = os.getppid(), time.monotonic() + 900
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(100_000):
        pass
"""


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """Keep every core busy (one spinning process per core, at least 2) for the test's
    duration; yields how many spin. Use with ``@pytest.mark.usefixtures("busy_cores")``."""
    count = max(2, os.cpu_count() or 2)
    spinners = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(count)
    ]
    try:
        yield count
        still = [s.poll() is None for s in spinners]
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
    assert all(still), "the load ended before the test did"
