"""``libtorch.build``: defaults of ``fdl libtorch build`` (an extension of ``libtorch:``)."""

from __future__ import annotations

from fdl.libtorch.build._request import build_spec
from fdl.manifest.schema import Spec

__all__ = ["FIELDS"]

FIELDS: dict[str, Spec] = {"build": build_spec()}
