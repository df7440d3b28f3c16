"""The project's ``libtorch:`` settings as the libtorch commands use them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fdl.libtorch._framework import TorchDecision, framework_torch
from fdl.libtorch.sources import MIRROR_ENV
from fdl.manifest import Manifest

__all__ = ["LibtorchSettings", "project_settings"]


@dataclass(frozen=True)
class LibtorchSettings:
    """``libtorch.torch``, ``libtorch.variant``, ``libtorch.mirror`` and ``libtorch.registry``.

    Attributes:
        torch: The PyTorch release to use: the manifest's ``libtorch.torch`` (checked
            against the framework), else the one the project's framework compiles
            against, else None (the newest).
        variant: The variant the project expects (``precompiled/cu130``), if any.
        mirror: Base URL of a download.pytorch.org mirror, if any.
        variant_origin: Where ``variant`` was set (``fdl.yml:20:12``), if it was.
        registry: The team's OCI repository of variants (``host/ns/name``), if any.
        framework: What the project's framework needs, and why ``torch`` is what it is.
    """

    torch: str | None = None
    variant: str | None = None
    mirror: str | None = None
    variant_origin: str | None = None
    registry: str | None = None
    framework: TorchDecision = field(default_factory=lambda: TorchDecision(None))

    def torch_for(self, flag: str | None, option: str = "--torch") -> str | None:
        """The torch a command uses: ``flag`` (``--torch``) when given and the framework
        can compile against it, else :attr:`torch`.

        Raises:
            UsageError: the framework cannot compile against ``flag`` (the check is off
                with ``libtorch.framework-check: false``).
        """
        if flag is None:
            return self.torch
        self.framework.require(flag, option)
        return flag


def project_settings(
    manifest: Manifest | None, environ: Mapping[str, str], directory: Path | None = None
) -> LibtorchSettings:
    """The settings of ``manifest``. Inside a project ``$FDL_LIBTORCH_MIRROR`` is already
    one of its layers (``fdl config explain libtorch.mirror`` names it); outside one
    (``manifest`` None) it is the only source of a mirror, and the framework is read from
    ``directory`` (the working directory: a Cargo project without an fdl.yml).

    Raises:
        ManifestError: ``libtorch.torch`` contradicts the project's framework, or the
            framework's release is unknown (see :func:`fdl.libtorch.framework_torch`).
    """
    if manifest is None:
        decision = framework_torch(None, directory)
        return LibtorchSettings(
            decision.torch,
            mirror=environ.get(MIRROR_ENV) or None,
            registry=environ.get("FDL_LIBTORCH_REGISTRY") or None,
            framework=decision,
        )
    data = manifest.get("libtorch") or {}
    mirror = data.get("mirror")
    decision = framework_torch(manifest)
    origin = manifest.origin(("libtorch", "variant"))
    return LibtorchSettings(
        decision.torch,
        data.get("variant"),
        mirror,
        str(origin) if origin is not None else None,
        registry=data.get("registry") or None,
        framework=decision,
    )
