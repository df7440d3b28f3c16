"""The wheel format, read without installing anything: file names, ``METADATA``,
``RECORD``, ``torch/version.py`` and the ``==`` pins of ``Requires-Dist``.

Pure functions of text (no I/O): the libtorch sources (a wheel file, a Python
environment's torch, the CPU view's remote wheels) and the refresh tool read wheels
through them. :mod:`fdl.formats.ranged` reads the members of remote wheels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fdl._grammar import count

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from fdl.net import IndexFile

__all__ = [
    "LINUX",
    "Metadata",
    "WheelName",
    "applicable",
    "build_number",
    "canonical",
    "dist_info_member",
    "exact_pins",
    "newest_pinned",
    "parse_metadata",
    "parse_record",
    "parse_version_py",
    "parse_wheel_name",
    "version_key",
]

# name-version(-build)?-python-abi-platform.whl
_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<tags>[^-]+-[^-]+-[^-]+)\.whl$"
)
# name (: annotation)? = 'value' | "value" | None, on one line: [^=\n] keeps a line of a
# thousand "a:" from being tried against every line after it (a quadratic search)
_VERSION_PY = re.compile(
    r"^(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|None)", re.MULTILINE
)
# The marker environment of Linux; a caller adds ``platform_machine`` (and Python's).
LINUX = {"platform_system": "Linux", "sys_platform": "linux"}


@dataclass(frozen=True)
class WheelName:
    """A wheel file name's parts: ``torch-2.10.0+cpu-1-cp311-cp311-manylinux_2_28_x86_64.whl``.

    Attributes:
        tags: ``python-abi-platform`` (``cp311-cp311-manylinux_2_28_x86_64``).
    """

    name: str
    version: str
    build: str | None
    tags: str

    def for_linux(self, machine: str, *, any_platform: bool = False) -> bool:
        """Built for Linux on ``machine`` (or, with ``any_platform``, a ``-any`` wheel)."""
        pattern = (
            rf"(linux\w*_{re.escape(machine)}|-any)$"
            if any_platform
            else rf"linux\w*_{re.escape(machine)}"
        )
        return re.search(pattern, self.tags) is not None


def parse_wheel_name(filename: str) -> WheelName | None:
    """The parts of a wheel's file name; None for a name that is no wheel's."""
    found = _NAME.match(filename)
    if not found:
        return None
    return WheelName(found["name"], found["version"], found["build"], found["tags"])


def build_number(filename: str) -> int:
    """The leading number of a wheel's build tag (a re-upload), 0 when none; a build tag
    that is no bounded ASCII number counts as 0."""
    parsed = parse_wheel_name(filename)
    digits = re.match(r"[0-9]+", (parsed.build if parsed else None) or "")
    return (count(digits.group()) or 0) if digits else 0


def version_key(version: str) -> tuple[int, ...]:
    """Sorts releases; a part that is no bounded ASCII number (``²``, 5000 digits) first."""
    return tuple(-1 if (n := count(p)) is None else n for p in version.split("."))


def canonical(project: str) -> str:
    """A project's normalized name (PEP 503): ``nvidia_cuda-runtime`` -> ``nvidia-cuda-runtime``."""
    return re.sub(r"[-_.]+", "-", project).lower()


def dist_info_member(names: Iterable[str], name: str) -> str | None:
    """The wheel's ``<project>-<version>.dist-info/<name>`` member, if it has one."""
    for member in names:
        parts = member.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == name:
            return member
    return None


@dataclass(frozen=True)
class Metadata:
    """What a wheel's ``METADATA`` says: its name, version and ``Requires-Dist`` lines."""

    name: str | None
    version: str | None
    requires: tuple[str, ...]


def parse_metadata(text: str) -> Metadata:
    """A ``METADATA`` file's headers (RFC 822 style; anything unreadable is absent)."""
    from email.parser import HeaderParser

    headers = HeaderParser().parsestr(text)
    name, version = headers.get("Name"), headers.get("Version")
    return Metadata(
        str(name) if name is not None else None,
        str(version) if version is not None else None,
        tuple(str(line) for line in headers.get_all("Requires-Dist") or ()),
    )


def parse_version_py(text: str) -> dict[str, str | None]:
    """``torch/version.py``'s assignments of strings (and None), read without running it."""
    return {m[1]: (m[2] if m[2] is not None else m[3]) for m in _VERSION_PY.finditer(text)}


def parse_record(text: bytes, *, hint: str | None = None) -> dict[str, tuple[str, int]]:
    """The wheel's RECORD (CSV: name, ``sha256=`` urlsafe base64 without padding, size):
    member -> (sha256 as hex, size). A digest that is no sha256 is kept as ``""``, which
    no member matches; a line without a bounded size is left out.

    Raises:
        ArchiveError: RECORD is not CSV (with ``hint``).
    """
    import base64
    import csv
    import io

    from fdl.archive import ArchiveError

    found: dict[str, tuple[str, int]] = {}
    lines = io.StringIO(text.decode("utf-8", "replace").replace("\0", ""), newline="")
    try:
        rows = list(csv.reader(lines))
    except csv.Error as exc:
        raise ArchiveError(f"the wheel's RECORD is not a CSV file: {exc}", hint=hint) from None
    for row in rows:
        size = count(row[2]) if len(row) == 3 else None
        if size is None or not row[1].startswith("sha256="):
            continue
        encoded = row[1].removeprefix("sha256=")
        try:
            raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except ValueError:  # binascii.Error: not base64
            raw = b""
        found[row[0]] = (raw.hex() if len(raw) == 32 else "", size)
    return found


def applicable(
    requires: Iterable[str], environment: Mapping[str, str], extras: Iterable[str] = ()
) -> Iterator[Requirement]:
    """The ``Requires-Dist`` lines that apply in the marker ``environment`` with one of
    ``extras`` chosen (none: no extra), parsed; a line that is no requirement is skipped."""
    from packaging.requirements import InvalidRequirement, Requirement

    chosen = list(extras) or [""]
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if marker is not None and not any(
            marker.evaluate({**environment, "extra": extra}) for extra in chosen
        ):
            continue
        yield requirement


def exact_pins(
    requires: Iterable[str], extras: Iterable[str] = (), *, machine: str = "x86_64"
) -> dict[str, str]:
    """``project -> specifier`` (``==12.8.90``, ``==13.0.96.*``) of the requirements that
    are one ``==`` and apply on Linux on ``machine`` with ``extras`` chosen."""
    found: dict[str, str] = {}
    for requirement in applicable(requires, {**LINUX, "platform_machine": machine}, extras):
        if [s.operator for s in requirement.specifier] == ["=="]:
            found[canonical(requirement.name)] = str(requirement.specifier)
    return found


def newest_pinned(
    files: Iterable[IndexFile], project: str, pin: str, machine: str
) -> IndexFile | None:
    """The index's newest wheel of ``project`` that the specifier ``pin`` allows, for
    Linux on ``machine`` or for any platform (not yanked); None when none fits."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    allowed = SpecifierSet(pin)
    fitting: list[tuple[Version, IndexFile]] = []
    for item in files:
        parsed = parse_wheel_name(item.filename)
        if parsed is None or canonical(parsed.name) != project or item.yanked:
            continue
        if not parsed.for_linux(machine, any_platform=True):
            continue
        try:
            version = Version(parsed.version)
        except InvalidVersion:
            continue
        if allowed.contains(version, prereleases=True):
            fitting.append((version, item))
    return max(fitting, key=lambda pair: pair[0])[1] if fitting else None
