"""Whether compiled GPU code runs on a GPU: NVIDIA's binary compatibility rules.

- a cubin for X.y runs on a GPU X.z with z >= y (same major only);
- PTX for P runs on any GPU >= P: the driver JIT-compiles it at load time;
- ``a`` targets (sm_90a) run only on exactly that capability;
- ``f`` targets (sm_100f) run on that capability and later members of its family (same major).

Capabilities are compared as numbers, never as text: the reference CLI's substring test
reported a GTX 1060 (6.1) as covered by a list containing "8.6".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from fdl.compat.archs import ArchList, Capability, Kind, Target, parse_capability

__all__ = ["Match", "Verdict", "covers", "runs_on"]


class Match(str, Enum):
    """How a GPU gets code it can run, best first."""

    NATIVE = "native"
    COMPATIBLE = "compatible"
    ARCH_SPECIFIC = "arch-specific"
    PTX = "ptx"
    NONE = "none"

    @property
    def rank(self) -> int:
        return list(Match).index(self)


@dataclass(frozen=True)
class Verdict:
    """Whether (and how) a GPU can run code from a set of targets.

    Attributes:
        gpu: The GPU's capability.
        match: How it runs (native cubin, compatible cubin, PTX JIT) or ``NONE``.
        target: The target that serves it, if any.
        reason: One line for a user: ``compatible cubin sm_60 runs on 6.1``.
    """

    gpu: Capability
    match: Match
    target: Target | None
    reason: str

    @property
    def ok(self) -> bool:
        return self.match is not Match.NONE


def _serves(target: Target, gpu: Capability) -> Match:
    cap = target.capability
    same_family = cap.major == gpu.major and gpu.minor >= cap.minor
    if target.kind is Kind.CUBIN:
        if target.suffix == "a":
            return Match.ARCH_SPECIFIC if cap == gpu else Match.NONE
        if cap == gpu:
            return Match.NATIVE
        return Match.COMPATIBLE if same_family else Match.NONE
    if target.suffix == "a":
        ok = cap == gpu
    elif target.suffix == "f":
        ok = same_family
    else:
        ok = gpu >= cap
    return Match.PTX if ok else Match.NONE


def _reason(match: Match, target: Target, gpu: Capability) -> str:
    if match is Match.NATIVE:
        return f"native cubin {target.code}"
    if match is Match.COMPATIBLE:
        return f"compatible cubin {target.code} runs on {gpu} (same major, older minor)"
    if match is Match.ARCH_SPECIFIC:
        return f"arch-specific cubin {target.code} (only kernels built for it)"
    return f"PTX {target.code} is JIT-compiled by the driver for {gpu} (slow first start)"


def runs_on(targets: ArchList | Iterable[Target], gpu: Capability | str) -> Verdict:
    """How a GPU runs code built for ``targets``, with the reason.

    Among several usable targets the best is chosen: a native cubin, then a compatible cubin
    (highest minor), then an arch-specific cubin, then PTX (highest capability).

    Args:
        targets: What the library or build contains.
        gpu: The GPU's capability (``Capability`` or text such as ``"6.1"``).
    """
    cap = parse_capability(gpu) if isinstance(gpu, str) else gpu
    best: tuple[int, tuple[int, int], Target] | None = None
    for target in targets:
        match = _serves(target, cap)
        if match is Match.NONE:
            continue
        candidate = (match.rank, (-target.capability.major, -target.capability.minor), target)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    if best is None:
        return Verdict(cap, Match.NONE, None, _nothing(targets, cap))
    target = best[2]
    match = list(Match)[best[0]]
    return Verdict(cap, match, target, _reason(match, target, cap))


def _nothing(targets: Iterable[Target], gpu: Capability) -> str:
    listed = ArchList.of(targets)
    has = " ".join(listed.codes()) or "no GPU code"
    return (
        f"no code for {gpu.label()}: needs a cubin for {gpu.major}.x at or below {gpu} "
        f"or PTX at or below {gpu}; has {has}"
    )


def covers(targets: ArchList | Iterable[Target], gpus: Iterable[Capability | str]) -> list[Verdict]:
    """:func:`runs_on` for each GPU, in order."""
    listed = list(targets)
    return [runs_on(listed, gpu) for gpu in gpus]
