"""Reading a build's output for a live status line: step counts, percentages, phases.

ninja prints ``[123/4567] Building CXX object c10/CMakeFiles/c10.dir/core/Device.cpp.o``;
make prints ``[ 42%] Building CUDA object ...``; BuildKit prefixes a container's output with
``#12 41.3 `` first. Everything else that looks like a phase (cmake configuring, cloning,
installing the build dependencies) changes the step text without a fraction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BuildStatus", "StatusParser", "compiled_objects"]

_BUILDKIT_PREFIX = re.compile(r"^#\d+\s+\d+(?:\.\d+)?\s+")
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")
_MAKE = re.compile(r"^\[\s*(\d+)%\]\s+(.*)$")
_OBJECT = re.compile(r"^(?:\[[^\]]*\]\s+)?Building (?:CXX|C|CUDA) object (\S+)")
_PHASES = (
    (re.compile(r"^-- Configuring done"), "configured"),
    (re.compile(r"^-- (The CXX compiler|Check for working|Detecting)"), "configuring"),
    (re.compile(r"^Cloning into"), "cloning the source"),
    (re.compile(r"^(Collecting|Installing collected packages)"), "installing build dependencies"),
    (re.compile(r"^-- Install(ing|ation)"), "installing libtorch"),
    (re.compile(r"^Reusing the CMake configuration"), "resuming the previous build"),
)


@dataclass(frozen=True)
class BuildStatus:
    """Where a build is.

    Attributes:
        step: What it does now (``Building CXX object ...``, ``configuring``).
        fraction: Done so far, 0..1, when the build tool says.
        done, total: ninja's edge counts, when known.
    """

    step: str
    fraction: float | None = None
    done: int | None = None
    total: int | None = None

    def text(self) -> str:
        if self.done is not None and self.total is not None:
            return f"[{self.done}/{self.total}] {self.step}"
        return self.step


class StatusParser:
    """Feed it output lines; it keeps the latest :class:`BuildStatus`."""

    def __init__(self) -> None:
        self.status: BuildStatus | None = None

    def feed(self, line: str) -> BuildStatus | None:
        """Take one line; return the new status when the line changed it."""
        text = _BUILDKIT_PREFIX.sub("", line.rstrip())
        ninja = _NINJA.match(text)
        if ninja is not None:
            done, total = int(ninja.group(1)), int(ninja.group(2))
            fraction = done / total if total else None
            self.status = BuildStatus(_shorten(ninja.group(3)), fraction, done, total)
            return self.status
        make = _MAKE.match(text)
        if make is not None:
            self.status = BuildStatus(_shorten(make.group(2)), int(make.group(1)) / 100)
            return self.status
        for pattern, phase in _PHASES:
            if pattern.match(text):
                self.status = BuildStatus(phase)
                return self.status
        return None


def _shorten(step: str) -> str:
    """``Building CXX object c10/CMakeFiles/c10.dir/core/Device.cpp.o`` -> ``... Device.cpp``."""
    match = _OBJECT.match(step)
    if match is None:
        return step
    name = match.group(1).rsplit("/", 1)[-1].removesuffix(".o")
    kind = step.split()[1]
    return f"compiling {name} ({kind})"


def compiled_objects(lines: list[str]) -> list[str]:
    """The object files a build log says were compiled (``Building CXX object X.o``)."""
    found = []
    for line in lines:
        text = _BUILDKIT_PREFIX.sub("", line.strip())
        match = _OBJECT.match(text)
        if match is not None:
            found.append(match.group(1))
    return found
