"""The project's ``libtorch:`` settings as the libtorch commands use them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fdl.libtorch._download import MIRROR_ENV
from fdl.manifest import Manifest

__all__ = ["LibtorchSettings", "project_settings"]


@dataclass(frozen=True)
class LibtorchSettings:
    """``libtorch.torch``, ``libtorch.variant``, ``libtorch.mirror`` and ``libtorch.registry``.

    Attributes:
        torch: The PyTorch release the project pins, if any.
        variant: The variant the project expects (``precompiled/cu130``), if any.
        mirror: Base URL of a download.pytorch.org mirror, if any.
        variant_origin: Where ``variant`` was set (``fdl.yml:20:12``), if it was.
        registry: The team's OCI repository of variants (``host/ns/name``), if any.
    """

    torch: str | None = None
    variant: str | None = None
    mirror: str | None = None
    variant_origin: str | None = None
    registry: str | None = None


def project_settings(manifest: Manifest | None, environ: Mapping[str, str]) -> LibtorchSettings:
    """The settings of ``manifest``. Inside a project ``$FDL_LIBTORCH_MIRROR`` is already
    one of its layers (``fdl config explain libtorch.mirror`` names it); outside one
    (``manifest`` None) it is the only source of a mirror."""
    if manifest is None:
        return LibtorchSettings(
            mirror=environ.get(MIRROR_ENV) or None,
            registry=environ.get("FDL_LIBTORCH_REGISTRY") or None,
        )
    data = manifest.get("libtorch") or {}
    mirror = data.get("mirror")
    torch = data.get("torch")
    origin = manifest.origin(("libtorch", "variant"))
    return LibtorchSettings(
        str(torch) if torch else None,
        data.get("variant"),
        mirror,
        str(origin) if origin is not None else None,
        data.get("registry") or None,
    )
