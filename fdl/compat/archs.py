"""GPU architectures: compute capabilities, compile targets, and arch lists.

A *capability* is what a GPU reports (6.1 for a GTX 1060). A *target* is what nvcc emits
for one: a cubin (``sm_61``, runs natively) or PTX (``compute_120``, compiled by the driver
at load time). ``a`` targets (``sm_90a``) run only on that exact capability, ``f`` targets
(``sm_100f``) on the capability and later members of its family.

:func:`parse_archs` reads every form users write (``6.1;12.0``, ``sm_61,sm_120``, ``61 120``,
``12.0a``, ``10.0f``, ``12.0+PTX``, ``compute_120``, ``6.1(6.0)``, ``Pascal``) into a sorted,
de-duplicated :class:`ArchList`, which renders as ``TORCH_CUDA_ARCH_LIST``, nvcc ``-gencode``
flags exactly as PyTorch's CMake produces them, or a directory name (``sm61-sm120``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import cache

from fdl.compat._data import load_table
from fdl.errors import UsageError

__all__ = [
    "ArchList",
    "Capability",
    "Kind",
    "Target",
    "capability_info",
    "family_names",
    "gpu_driver_floor",
    "known_capabilities",
    "parse_archs",
    "parse_capability",
]

SUFFIXES = ("", "a", "f")
_FORMS = "6.1, sm_61, 61, 12.0a, 10.0f, 12.0+PTX, compute_120, 6.1(6.0) or a name such as Pascal"
_SEPARATORS = re.compile(r"[;,\s]+")
_NUMBER = re.compile(r"^(\d+)(?:\.(\d+))?$")
_TOKEN = re.compile(
    r"^(?:(?P<prefix>sm|compute|ptx)_?)?(?P<num>\d+(?:\.\d+)?)(?P<suffix>[af])?"
    r"(?:\((?P<virtual>\d+(?:\.\d+)?)\))?$",
    re.IGNORECASE,
)
_PTX_SUFFIX = "+ptx"


@dataclass(frozen=True, order=True)
class Capability:
    """A compute capability ``major.minor`` (6.1, 12.0)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def number(self) -> int:
        """nvcc's number: 61 for 6.1, 120 for 12.0."""
        return self.major * 10 + self.minor

    @property
    def sm(self) -> str:
        """``sm_61``."""
        return f"sm_{self.number}"

    @classmethod
    def from_number(cls, number: int) -> Capability:
        """From nvcc's number (75 -> 7.5, 121 -> 12.1)."""
        return cls(number // 10, number % 10)

    @property
    def generation(self) -> str | None:
        """The architecture name (``Pascal``), if known."""
        info = _capabilities().get(self)
        return info[0] if info else None

    def label(self) -> str:
        """``sm_61 (Pascal)``; just ``sm_61`` when the name is unknown."""
        generation = self.generation
        return f"{self.sm} ({generation})" if generation else self.sm


class Kind(str, Enum):
    """What nvcc emits for a target."""

    CUBIN = "cubin"
    PTX = "ptx"


@dataclass(frozen=True)
class Target:
    """One nvcc output: a cubin or PTX for a capability.

    Attributes:
        capability: The capability the code is for.
        kind: cubin (machine code) or PTX (compiled by the driver at load time).
        suffix: ``""``, ``"a"`` (arch-specific) or ``"f"`` (family).
        virtual: For a cubin built from another capability's PTX (``6.1(6.0)``), that one.
    """

    capability: Capability
    kind: Kind = Kind.CUBIN
    suffix: str = ""
    virtual: Capability | None = None

    @property
    def code(self) -> str:
        """nvcc's code name: ``sm_90a`` or ``compute_120``."""
        prefix = "sm" if self.kind is Kind.CUBIN else "compute"
        return f"{prefix}_{self.capability.number}{self.suffix}"

    @property
    def arch(self) -> str:
        """The virtual arch nvcc compiles through: ``compute_61``."""
        source = self.virtual or self.capability
        return f"compute_{source.number}{self.suffix}"

    def sort_key(self) -> tuple[int, int, int, int, int]:
        virtual = self.virtual.number if self.virtual else 0
        kind = 0 if self.kind is Kind.CUBIN else 1
        cap = self.capability
        return (cap.major, cap.minor, SUFFIXES.index(self.suffix), kind, virtual)

    def __str__(self) -> str:
        if self.virtual is not None:
            return f"{self.code}(compute_{self.virtual.number})"
        return self.code


@dataclass(frozen=True)
class ArchList:
    """A sorted, de-duplicated set of targets; build it with :func:`parse_archs` or :meth:`of`."""

    targets: tuple[Target, ...] = ()

    @classmethod
    def of(cls, targets: Iterable[Target]) -> ArchList:
        """Sort and de-duplicate ``targets``."""
        return cls(tuple(sorted(set(targets), key=Target.sort_key)))

    def __iter__(self) -> Iterator[Target]:
        return iter(self.targets)

    def __len__(self) -> int:
        return len(self.targets)

    def __bool__(self) -> bool:
        return bool(self.targets)

    def __or__(self, other: ArchList) -> ArchList:
        return ArchList.of((*self.targets, *other.targets))

    @property
    def cubins(self) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if t.kind is Kind.CUBIN)

    @property
    def ptx(self) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if t.kind is Kind.PTX)

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        """Every capability named by a target, sorted."""
        return tuple(sorted({t.capability for t in self.targets}))

    def codes(self) -> list[str]:
        """nvcc code names, cubins first: ``["sm_61", "sm_120", "compute_120"]``."""
        return [t.code for t in (*self.cubins, *self.ptx)]

    def torch_cuda_arch_list(self) -> str:
        """The ``TORCH_CUDA_ARCH_LIST`` value: ``6.1;12.0+PTX``.

        PyTorch cannot ask for PTX without the cubin of the same arch, so a PTX-only target
        (``compute_120``) renders as ``12.0+PTX``, which builds the cubin as well.
        """
        plain = {(t.capability, t.suffix) for t in self.cubins if t.virtual is None}
        ptx = {(t.capability, t.suffix) for t in self.ptx}
        entries: list[tuple[tuple[int, int, int, int], str]] = []
        for cap, suffix in plain | ptx:
            text = f"{cap}{suffix}" + ("+PTX" if (cap, suffix) in ptx else "")
            entries.append(((cap.major, cap.minor, SUFFIXES.index(suffix), 0), text))
        for target in self.cubins:
            if target.virtual is not None:
                key = (target.capability.major, target.capability.minor, 0, target.virtual.number)
                entries.append((key, f"{target.capability}({target.virtual})"))
        entries.sort()
        return ";".join(text for _, text in entries)

    def gencode_flags(self) -> list[str]:
        """nvcc arguments, as PyTorch's ``select_compute_arch.cmake`` emits them.

        ``6.1;12.0+PTX`` -> ``-gencode arch=compute_61,code=sm_61 -gencode
        arch=compute_120,code=sm_120 -gencode arch=compute_120,code=compute_120``.
        """
        flags: list[str] = []
        for target in (*self.cubins, *self.ptx):
            flags += ["-gencode", f"arch={target.arch},code={target.code}"]
        return flags

    def gencode(self) -> str:
        """:meth:`gencode_flags` as one string."""
        return " ".join(self.gencode_flags())

    def dir_name(self) -> str:
        """A directory name: ``sm61-sm120``; PTX as ``ptx120``, ``6.1(6.0)`` as ``sm61v60``."""
        parts = []
        for target in (*self.cubins, *self.ptx):
            if target.kind is Kind.PTX:
                parts.append(f"ptx{target.capability.number}{target.suffix}")
            elif target.virtual is not None:
                parts.append(f"sm{target.capability.number}v{target.virtual.number}")
            else:
                parts.append(f"sm{target.capability.number}{target.suffix}")
        return "-".join(parts)


@cache
def _capabilities() -> dict[Capability, tuple[str | None, str]]:
    table = load_table("archs")
    result: dict[Capability, tuple[str | None, str]] = {}
    for entry in table["capabilities"]:
        result[_cap_from_text(str(entry["cc"]))] = (
            entry.get("generation"),
            entry.get("examples", ""),
        )
    return result


@cache
def _families() -> dict[str, tuple[str, tuple[Capability, ...], tuple[Capability, ...]]]:
    result = {}
    for entry in load_table("archs")["families"]:
        archs = tuple(_cap_from_text(a) for a in entry["archs"])
        ptx = tuple(_cap_from_text(a) for a in entry.get("ptx", entry["archs"]))
        result[entry["name"].lower()] = (entry["name"], archs, ptx)
    return result


def known_capabilities() -> tuple[Capability, ...]:
    """Every capability in the data table, sorted."""
    return tuple(sorted(_capabilities()))


@cache
def _driver_floors() -> dict[Capability, str]:
    return {
        _cap_from_text(str(entry["cc"])): str(entry["driver_min"])
        for entry in load_table("archs")["capabilities"]
        if entry.get("driver_min")
    }


def gpu_driver_floor(capability: Capability) -> str | None:
    """The oldest driver branch that supports a GPU of ``capability`` at all (``570`` for
    Blackwell), whatever toolkit built the code; None when the tables name none."""
    return _driver_floors().get(capability)


def capability_info(capability: Capability) -> tuple[str | None, str]:
    """(generation name, example products) of a capability; (None, "") if unknown."""
    return _capabilities().get(capability, (None, ""))


def family_names() -> tuple[str, ...]:
    """The architecture names PyTorch accepts (``Pascal``, ``Blackwell``, ...)."""
    return tuple(name for name, _, _ in _families().values())


def family_archs(name: str) -> tuple[Capability, ...]:
    """The capabilities a family name expands to (``Pascal`` -> 6.0, 6.1).

    Raises:
        UsageError: the name is not a known family.
    """
    entry = _families().get(name.lower())
    if entry is None:
        raise UsageError(
            f"unknown architecture name {name!r}", hint=f"known: {', '.join(family_names())}"
        )
    return entry[1]


def _cap_from_text(text: str) -> Capability:
    """6.1 / 61 / 120 -> Capability; ValueError when the text is no capability."""
    match = _NUMBER.match(text.strip())
    if match is None:
        raise ValueError(text)
    whole, minor = match.group(1), match.group(2)
    if minor is not None:
        if len(minor) != 1:
            raise ValueError(text)
        return Capability(int(whole), int(minor))
    if len(whole) < 2:
        raise ValueError(text)
    return Capability.from_number(int(whole))


def parse_capability(text: str) -> Capability:
    """A GPU's capability from ``6.1``, ``61`` or ``sm_61``.

    Raises:
        UsageError: the text is not a capability.
    """
    match = _TOKEN.match(text.strip())
    try:
        if match is None or match["suffix"] or match["virtual"]:
            raise ValueError(text)
        return _cap_from_text(match["num"])
    except ValueError:
        raise UsageError(
            f"{text!r} is not a compute capability", hint="write it as 6.1, 61 or sm_61"
        ) from None


def parse_archs(spec: str | Iterable[str]) -> ArchList:
    """Parse an architecture list in any of the forms users write.

    Entries are separated by ``;``, ``,``, ``-`` or whitespace; names are case-insensitive.

    Raises:
        UsageError: an entry is not understood or names an unknown capability; the message
            quotes the entry.
    """
    text = spec if isinstance(spec, str) else ";".join(spec)
    tokens = [t for t in _SEPARATORS.split(text.replace("-", ";")) if t]
    if not tokens:
        raise UsageError("no GPU architectures given", hint=f"write them as {_FORMS}")
    targets: list[Target] = []
    for token in tokens:
        targets += _parse_token(token, text)
    return ArchList.of(targets)


def _parse_token(token: str, whole: str) -> list[Target]:
    add_ptx = token.lower().endswith(_PTX_SUFFIX)
    body = token[: -len(_PTX_SUFFIX)] if add_ptx else token
    refused = load_table("archs").get("refused_words", {})
    if body.lower() in refused:
        raise UsageError(
            f"{body!r} in {whole!r} is not accepted: {refused[body.lower()]}",
            hint="list the archs explicitly (fdl detects your GPUs for you)",
        )
    family = _families().get(body.lower())
    if family is not None:
        _, archs, ptx = family
        cubins = [Target(c) for c in archs]
        return cubins + ([Target(c, Kind.PTX) for c in ptx] if add_ptx else [])
    match = _TOKEN.match(body)
    if match is None:
        raise _bad(token, whole, "not an architecture")
    try:
        capability = _cap_from_text(match["num"])
        virtual = _cap_from_text(match["virtual"]) if match["virtual"] else None
    except ValueError:
        raise _bad(token, whole, "not a capability (write 6.1, 61 or sm_61)") from None
    suffix = (match["suffix"] or "").lower()
    _check_known(token, whole, capability, suffix)
    if virtual is not None:
        _check_known(token, whole, virtual, "")
        if suffix or (match["prefix"] or "").lower() in ("compute", "ptx"):
            raise _bad(token, whole, "the X.Y(A.B) form takes plain capabilities only")
    if (match["prefix"] or "").lower() in ("compute", "ptx"):
        return [Target(capability, Kind.PTX, suffix)]
    result = [Target(capability, Kind.CUBIN, suffix, virtual)]
    if add_ptx:
        result.append(Target(capability, Kind.PTX, suffix))
    return result


def _check_known(token: str, whole: str, capability: Capability, suffix: str) -> None:
    if capability not in _capabilities():
        known = " ".join(str(c) for c in known_capabilities())
        shown = f"{token!r}" if token == whole.strip() else f"{token!r} in {whole!r}"
        raise UsageError(
            f"unknown GPU architecture {shown}: no GPU has compute capability {capability}",
            hint=f"known capabilities: {known}",
        )
    minimum = load_table("archs").get("suffix_min", {}).get(suffix)
    if minimum is not None and capability < _cap_from_text(str(minimum)):
        raise _bad(token, whole, f"`{suffix}` targets exist from {minimum} on")


def _bad(token: str, whole: str, why: str) -> UsageError:
    shown = f"{token!r}" if token == whole.strip() else f"{token!r} in {whole!r}"
    return UsageError(f"bad GPU architecture {shown}: {why}", hint=f"write it as {_FORMS}")
