"""Which libtorch the project's framework compiles against, read from the project's files.

:func:`detect_framework` reads, in this order, ``Cargo.lock`` (the release Cargo resolved),
``Cargo.toml`` (dependencies, ``[workspace.dependencies]``, path dependencies, and the
workspace's own crates: floDl's repository *is* floDl), and ``CMakeLists.txt``
(``find_package(Torch <version> [EXACT])``, ``CMAKE_CXX_STANDARD``). The release is looked up
in ``frameworks.yaml`` (:mod:`fdl.compat.frameworks`). :func:`framework_torch` then gives the
one torch release every libtorch decision uses: the manifest's ``libtorch.torch`` when it
agrees with the framework (refused at its line when not, unless
``libtorch.framework-check: false``), else the framework's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fdl.errors import ManifestError, UsageError
from fdl.libtorch._framework_files import CHECK_KEY, FrameworkPin, detect_framework
from fdl.manifest import Manifest

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "CHECK_KEY",
    "FrameworkPin",
    "TorchDecision",
    "detect_framework",
    "framework_torch",
]


@dataclass(frozen=True)
class TorchDecision:
    """The torch release the project's libtorch commands use, and why.

    Attributes:
        torch: The release (``2.10.0``), None when nothing constrains it (the newest).
        pins: The frameworks found.
        why: One line for people.
        checked: False when ``libtorch.framework-check: false`` switched the check off.
        origin: Where ``torch`` comes from, short (``Cargo.lock:41:11 (floDl 0.5.3)``).
    """

    torch: str | None
    pins: tuple[FrameworkPin, ...] = ()
    why: str = ""
    checked: bool = True
    origin: str = ""

    def refusal(self, torch: str) -> str | None:
        """Why a framework of the project cannot compile against ``torch``, or None."""
        if not self.checked:
            return None
        for pin in self.pins:
            reason = pin.refusal(torch)
            if reason:
                return reason
        return None

    def require(self, torch: str, option: str) -> None:
        """Refuse ``torch``, given as ``option`` (``--torch``), when a framework of the
        project cannot compile against it.

        Raises:
            UsageError: it cannot (with both facts and the fix).
        """
        from fdl import compat

        try:
            full = compat.resolve_torch_version(torch)
        except UsageError:
            return  # the command reports an unknown release itself
        reason = self.refusal(full)
        if reason is None:
            return
        best = _agreed(self.pins) if self.checked else None
        instead = (
            f"drop {option} (torch {best[1]} is the default here)" if best else f"drop {option}"
        )
        raise UsageError(
            f"{option} {torch}: {reason}",
            hint=f"{instead}; to use torch {full} anyway: fdl --set {CHECK_KEY}=false ...",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "torch": self.torch,
            "why": self.why,
            "checked": self.checked,
            "origin": self.origin,
            "frameworks": [p.to_json() for p in self.pins],
        }


def framework_torch(manifest: Manifest | None, directory: Path | None = None) -> TorchDecision:
    """The torch release the project's libtorch decisions use.

    The manifest's ``libtorch.torch`` when the framework can compile against it; the
    framework's own release when the manifest names none.

    Raises:
        ManifestError: ``libtorch.torch`` contradicts the framework (at its line, with both
            facts), two frameworks of the project need different releases, or a framework
            release is unknown.
    """
    root = manifest.directory if manifest is not None else directory
    if root is None:
        return TorchDecision(None)
    checked = manifest is None or manifest.get(CHECK_KEY) is not False
    wanted = manifest.get("libtorch.torch") if manifest is not None else None
    try:
        pins = detect_framework(root)
    except ManifestError:
        if checked or wanted is None:
            raise
        # The way out fdl offers for a release it cannot read: the user names the torch and
        # switches the check off, so what the framework files say is not needed.
        pins = ()
    if wanted is not None:
        full = _full(str(wanted), manifest)
        origin = manifest.origin("libtorch.torch") if manifest is not None else None
        where = str(origin.location()) if origin is not None else "libtorch.torch"
        decision = TorchDecision(full, pins, f"libtorch.torch ({where})", checked, where)
        reason = decision.refusal(full)
        if reason and manifest is not None:
            raise manifest.error(
                "libtorch.torch",
                f"{wanted} cannot be used: {reason}",
                hint=_fix(pins, full),
            )
        return decision
    if not pins:
        return TorchDecision(None, pins, "", checked)
    try:
        chosen = _agreed(pins)
    except ManifestError:
        if checked:
            raise
        chosen = None  # the user switched the check off: their frameworks, their call
    if chosen is None:
        return TorchDecision(None, pins, "", checked)
    pin, torch = chosen
    why = f"{pin.label} compiles against torch {torch} ({pin.how})"
    return TorchDecision(torch, pins, why, checked, f"{pin.origin} ({pin.label})")


def _full(wanted: str, manifest: Manifest | None) -> str:
    from fdl import compat

    try:
        return compat.resolve_torch_version(wanted)
    except compat.NewerRelease as exc:
        # the command reads the release at run time (fdl.cli._learn) and plans again
        if manifest is not None:
            exc.location = manifest.error("libtorch.torch", exc.message).location
        raise
    except UsageError as exc:
        if manifest is None:
            raise
        raise manifest.error("libtorch.torch", exc.message, hint=exc.hint) from None


def _fix(pins: tuple[FrameworkPin, ...], refused: str) -> str:
    best = _agreed(pins)
    set_it = f'libtorch.torch: "{best[1]}" (or remove the key)' if best else "remove the key"
    return (
        f"set {set_it}; to keep torch {refused} on purpose, set "
        f"{CHECK_KEY}: false (see README: how fdl finds the framework's libtorch)"
    )


def _agreed(pins: tuple[FrameworkPin, ...]) -> tuple[FrameworkPin, str] | None:
    """The torch every pin accepts, from the most exact pin; None when none constrains."""
    ordered = sorted(pins, key=lambda p: (not p.exact, p.torch is None))
    for pin in ordered:
        torch = pin.best_torch()
        if torch is None:
            continue
        for other in pins:
            reason = other.refusal(torch)
            if reason:
                raise ManifestError(
                    f"the project's frameworks need different libtorch releases: {pin.label} "
                    f"needs torch {torch} ({pin.origin}), but {reason}",
                    hint="align the framework releases (cargo update -p <crate> --precise ...)",
                )
        return pin, torch
    return None
