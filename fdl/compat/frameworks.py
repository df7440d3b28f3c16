"""Which libtorch each framework release compiles against (``frameworks.yaml``).

A framework (floDl, tch-rs) is made for one libtorch release: floDl pins it in its CLI,
images and CI; torch-sys refuses any other release in its build script. This module answers,
for a framework release or a Cargo version requirement, which torch that is, and which C++
standard a torch release's headers require. A release the table lacks is an error that names
the newest known row, never a default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from fdl.compat._data import CompatDataError, in_range, load_table, require, version_key
from fdl.errors import UsageError

__all__ = [
    "Framework",
    "FrameworkRelease",
    "UnknownFrameworkRelease",
    "framework",
    "framework_for_crate",
    "framework_release",
    "frameworks",
    "headers_cxx_standard",
    "matching_release",
    "parse_cargo_requirement",
]


@dataclass(frozen=True)
class FrameworkRelease:
    """One framework release and the libtorch it compiles against.

    Attributes:
        framework: The framework's key (``flodl``, ``tch``).
        title: Its name for people (``floDl``).
        version: The release (``0.5.3``).
        torch: The torch release it compiles against (``2.10.0``).
        cxx_standard: The C++ standard it compiles its own C++ with (17).
        source: Where the row comes from.
    """

    framework: str
    title: str
    version: str
    torch: str
    cxx_standard: int
    source: str

    @property
    def label(self) -> str:
        """``floDl 0.5.3``."""
        return f"{self.title} {self.version}"


@dataclass(frozen=True)
class Framework:
    """A framework: the crates that carry its release, the variable it reads, its rows.

    Attributes:
        name: ``flodl`` or ``tch``.
        title: ``floDl``, ``tch-rs``.
        crates: Crates whose version is the framework's release, in order of preference.
        reads: The variable its build script reads to find libtorch.
        releases: Known releases, oldest first.
    """

    name: str
    title: str
    crates: tuple[str, ...]
    reads: str
    releases: tuple[FrameworkRelease, ...]

    @property
    def newest(self) -> FrameworkRelease:
        return self.releases[-1]


class UnknownFrameworkRelease(UsageError):
    """A framework release (or requirement) the table does not know.

    Attributes:
        newest: The newest release the table knows (the suggestion).
    """

    def __init__(self, message: str, newest: FrameworkRelease) -> None:
        super().__init__(
            message,
            hint=f"the newest release fdl knows is {newest.label} (torch {newest.torch})",
        )
        self.newest = newest


@cache
def frameworks() -> tuple[Framework, ...]:
    """Every framework of the table."""
    table = load_table("frameworks")
    found: list[Framework] = []
    for name, raw in sorted(require(table, "frameworks", "frameworks.yaml").items()):
        where = f"frameworks.yaml: {name}"
        title = str(require(raw, "title", where))
        rows: list[FrameworkRelease] = []
        for row in require(raw, "releases", where):
            for version in require(row, "versions", where):
                rows.append(
                    FrameworkRelease(
                        name,
                        title,
                        str(version),
                        str(require(row, "torch", where)),
                        int(require(row, "cxx_standard", where)),
                        " ".join(str(require(row, "source", where)).split()),
                    )
                )
        rows.sort(key=lambda r: version_key(r.version))
        crates = tuple(str(c) for c in require(raw, "crates", where))
        found.append(Framework(name, title, crates, str(require(raw, "reads", where)), tuple(rows)))
    return tuple(found)


def framework(name: str) -> Framework:
    """The framework ``name`` (``flodl``, ``tch``).

    Raises:
        CompatDataError: no such framework in the table (a bug in the caller).
    """
    for candidate in frameworks():
        if candidate.name == name:
            return candidate
    raise CompatDataError(f"frameworks.yaml has no framework {name!r}")


def framework_for_crate(crate: str) -> Framework | None:
    """The framework whose release ``crate`` carries (``torch-sys`` -> tch), if any."""
    for candidate in frameworks():
        if crate in candidate.crates:
            return candidate
    return None


def framework_release(name: str, version: str) -> FrameworkRelease:
    """The row of release ``version`` of framework ``name`` (exact: ``0.5.3``).

    Raises:
        UnknownFrameworkRelease: the table has no such release.
    """
    known = framework(name)
    for row in known.releases:
        if _same(row.version, version):
            return row
    raise UnknownFrameworkRelease(
        f"unknown release of {known.title}: {version} ({_known_span(known)})", known.newest
    )


def matching_release(name: str, requirement: str) -> FrameworkRelease:
    """The newest known release matching a Cargo requirement (``0.5.3`` means ``^0.5.3``),
    the one ``cargo`` would pick among the releases fdl knows.

    Raises:
        UnknownFrameworkRelease: no known release matches, or the requirement is not one
            Cargo reads.
    """
    known = framework(name)
    try:
        accepts = parse_cargo_requirement(requirement)
    except ValueError as exc:
        raise UnknownFrameworkRelease(
            f"{known.title} requirement {requirement!r} is not one Cargo reads: {exc}",
            known.newest,
        ) from None
    matched = [row for row in known.releases if accepts(version_key(row.version))]
    if not matched:
        raise UnknownFrameworkRelease(
            f"unknown release of {known.title}: no release fdl knows matches {requirement!r} "
            f"({_known_span(known)})",
            known.newest,
        )
    return matched[-1]


def _same(a: str, b: str) -> bool:
    try:
        return _triple(version_key(a)) == _triple(version_key(b)) and "-" not in b
    except ValueError:
        return False


def _known_span(known: Framework) -> str:
    return f"fdl knows {known.releases[0].version} to {known.newest.version}"


def _triple(key: tuple[int, ...]) -> tuple[int, int, int]:
    padded = (*key, 0, 0, 0)
    return padded[0], padded[1], padded[2]


_Test = Callable[[tuple[int, int, int]], bool]

_COMPARATOR = re.compile(
    r"^(\^|~|=|>=|<=|>|<)?\s*(\d+)(?:\.(\d+|\*))?(?:\.(\d+|\*))?(-[0-9A-Za-z.-]+)?$"
)


def parse_cargo_requirement(text: str) -> Callable[[tuple[int, ...]], bool]:
    """A Cargo version requirement as a test of ``(major, minor, patch)``.

    Comparators separated by commas must all hold: ``^`` (the default: ``0.5.3`` is
    ``>=0.5.3, <0.6.0``), ``~``, ``=``, ``>``/``>=``/``<``/``<=``, wildcards (``0.5.*``, ``*``).

    Raises:
        ValueError: not a requirement Cargo reads.
    """
    tests: list[_Test] = []
    for raw in text.split(","):
        part = raw.strip()
        if part == "*":
            continue
        match = _COMPARATOR.match(part)
        if match is None:
            raise ValueError(f"{part!r} is not a version comparator")
        op, major, minor, patch, _pre = match.groups()
        if op and op not in ("^", "~", "=") and "*" in (minor, patch):
            raise ValueError(f"{part!r}: a wildcard cannot follow {op}")
        tests.append(_comparator(op or "^", int(major), minor, patch))
    if not tests and text.strip() != "*":
        raise ValueError("empty requirement")
    return lambda key: all(test(_triple(key)) for test in tests)


def _comparator(op: str, major: int, minor: str | None, patch: str | None) -> _Test:
    parts = [major] + [int(p) for p in (minor, patch) if p is not None and p != "*"]
    given = len(parts)
    low = _triple(tuple(parts))
    if op in (">", ">=", "<", "<="):
        return _ordered(op, low, given)
    if op == "=":
        if given == 3:
            return lambda v: v == low
        below = _bump(low, given - 1)
        return lambda v: low <= v < below
    if op == "~" or "*" in (minor, patch):
        tilde = _bump(low, min(given, 2) - 1)
        return lambda v: low <= v < tilde
    # caret: the leftmost non-zero component (of those given) may not change
    index = next((i for i, p in enumerate(parts) if p != 0), given - 1)
    upper = _bump(low, index)
    return lambda v: low <= v < upper


def _ordered(op: str, low: tuple[int, int, int], given: int) -> _Test:
    # A partial bound compares only its own components: `<0.6` is `<0.6.0`, `>0.5` is `>=0.6.0`.
    after = _bump(low, given - 1)
    if op == ">=":
        return lambda v: v >= low
    if op == "<":
        return lambda v: v < low
    if op == ">":
        return lambda v: v >= after if given < 3 else v > low
    return lambda v: v < after if given < 3 else v <= low


def _bump(key: tuple[int, int, int], index: int) -> tuple[int, int, int]:
    parts = list(key)
    parts[index] += 1
    for later in range(index + 1, 3):
        parts[later] = 0
    return parts[0], parts[1], parts[2]


def headers_cxx_standard(torch: str) -> int:
    """The C++ standard libtorch ``torch``'s headers require (``2.14.1`` -> 20).

    Raises:
        UsageError: the table has no row for that release.
    """
    for row in _header_rows():
        if in_range(torch, row.get("since"), row.get("until")):
            return int(row["cxx_standard"])
    raise UsageError(f"fdl does not know which C++ standard torch {torch}'s headers need")


def _header_rows() -> list[Mapping[str, Any]]:
    return list(require(load_table("frameworks"), "headers", "frameworks.yaml"))
