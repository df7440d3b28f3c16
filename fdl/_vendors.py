"""Which GPU stack a libtorch variant targets: ``cpu``, ``nvidia`` or ``amd``.

floDl 0.8.0 decides from the variant's basename alone (flodl-hw-0.8.0/src/vendor.rs:84-113,
flodl-cli-0.8.0/src/libtorch/detect.rs:158-205): ``cpu`` or ``cpu-*`` is CPU, ``cu<N>`` and
``sm<N>`` are NVIDIA, ``rocm<N>`` and ``gfx<N>`` are AMD; a prefix counts only when a digit
follows it. Anything else is assumed NVIDIA (with a warning, which is the caller's business).

Kept outside :mod:`fdl.compat` (which re-exports it as :mod:`fdl.compat.vendors`) so that
``fdl libtorch list`` asks it without loading the compatibility tables' package.

fdl's variant names are chosen by the user (``builds/pascal-blackwell``,
``--name mybuild``), so where fdl has read the binaries (``variant.json``) or floDl wrote an
``.arch`` file, those facts decide first and the name only breaks a tie.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # typing stays out of `fdl libtorch list` (start-up)
if TYPE_CHECKING:
    from typing import Any, Literal

    Vendor = Literal["cpu", "nvidia", "amd"]

__all__ = ["classify_variant_label", "vendor_of_variant"]

_NVIDIA_PREFIXES = ("cu", "sm")
_AMD_PREFIXES = ("rocm", "gfx")


def classify_variant_label(name: str) -> Vendor | None:
    """The reference's reading of a variant name's basename; None when it says nothing.

    Args:
        name: ``precompiled/cu128``, ``builds/sm61-sm120``, ``rocm70``...

    Returns:
        ``cpu``, ``nvidia`` or ``amd``; None for a name outside the convention (the
        reference then assumes NVIDIA and warns).
    """
    base = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if base == "cpu" or base.startswith("cpu-"):
        return "cpu"

    def tagged(prefix: str) -> bool:
        rest = base[len(prefix) :] if base.startswith(prefix) else ""
        return rest[:1].isascii() and rest[:1].isdigit()

    if any(tagged(p) for p in _NVIDIA_PREFIXES):
        return "nvidia"
    if any(tagged(p) for p in _AMD_PREFIXES):
        return "amd"
    return None


def vendor_of_variant(name: str, facts: Mapping[str, Any] | None = None) -> Vendor:
    """The GPU stack a libtorch variant targets.

    Args:
        name: The variant's name (``precompiled/cu128``); its basename is read as floDl
            0.8.0 reads it.
        facts: What is recorded about the variant: fdl's ``variant.json`` (``cuda``,
            ``archs_found``, ``archs_requested``, ``extra``) or floDl's ``.arch`` keys
            (``cuda=none``, ``archs=gfx908 ...``, ``variant=rocm7.0``). None when nothing is.

    Returns:
        ``nvidia`` when the facts name a CUDA version or an ``sm`` arch, ``amd`` when they
        name a ROCm/HIP version or a ``gfx`` arch; otherwise the name decides; a name
        outside the convention is ``cpu`` when facts say there is no CUDA, else ``nvidia``
        (the reference's fallback).
    """
    label = classify_variant_label(name)
    if not facts:
        return label or "nvidia"
    if _present(facts.get("hip")) or _present(facts.get("rocm")):
        return "amd"
    extra = facts.get("extra")
    if isinstance(extra, Mapping) and (_present(extra.get("hip")) or _present(extra.get("rocm"))):
        return "amd"
    archs = _archs(facts)
    if any(a.startswith("gfx") for a in archs):
        return "amd"
    if _present(facts.get("cuda")):
        return "nvidia"
    if any(a.startswith(("sm", "compute")) or a[:1].isdigit() for a in archs):
        return "nvidia"
    recorded = facts.get("variant")
    if isinstance(recorded, str) and classify_variant_label(recorded) == "amd":
        return "amd"
    # The facts say: no CUDA, no GPU arch. An AMD name stays AMD (fdl does not yet record
    # ROCm in variant.json, and floDl's rocm .arch reads cuda=none); anything else is CPU.
    return "amd" if label == "amd" else "cpu"


def _present(value: Any) -> bool:
    """A recorded version: not missing, empty, or floDl's ``none``."""
    return value is not None and str(value).strip().lower() not in ("", "none", "null", "false")


def _archs(facts: Mapping[str, Any]) -> list[str]:
    """Every arch token recorded, lower-case (lists, ``{"cubin": [...]}`` or ``.arch`` text)."""
    found: list[str] = []
    for key in ("archs_found", "archs_requested", "archs"):
        value = facts.get(key)
        if isinstance(value, Mapping):
            for group in value.values():
                if isinstance(group, list):
                    found.extend(str(v) for v in group)
        elif isinstance(value, list):
            found.extend(str(v) for v in value)
        elif isinstance(value, str):
            found.extend(value.replace(";", " ").replace(",", " ").split())
    return [a.strip().lower() for a in found if a.strip().lower() not in ("", "cpu", "none")]
