"""Files shipped with fdl: templates, dockerfiles, recipes, data.

In a wheel they live in ``fdl/_assets/<kind>`` (hatch force-include) and
``fdl/data``; in a source checkout the top-level folders are used.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["asset_dir", "data_dir"]

_PACKAGE = Path(__file__).resolve().parent
KINDS = ("templates", "dockerfiles", "recipes")


def asset_dir(kind: str) -> Path:
    """The directory of shipped ``kind`` files (``templates``, ``dockerfiles``, ``recipes``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown asset kind {kind!r}")
    packaged = _PACKAGE / "_assets" / kind
    if packaged.is_dir():
        return packaged
    checkout = _PACKAGE.parent / kind
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"fdl is installed without its {kind} (looked in {packaged})")


def data_dir() -> Path:
    """The directory of shipped data files (compatibility tables)."""
    return _PACKAGE / "data"
