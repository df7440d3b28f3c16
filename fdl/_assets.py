"""Files shipped with fdl: templates, dockerfiles, recipes, data.

In a wheel they live in ``fdl/_assets/<kind>`` (hatch force-include) and
``fdl/data``; in a source checkout the top-level folders are used.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

__all__ = ["asset_dir", "data_dir", "template_environment"]

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


@functools.cache
def template_environment(directory: Path) -> jinja2.Environment:
    """The one jinja setup for every file fdl renders from ``directory``: undefined values
    are errors, whitespace is controlled by the templates, nothing is HTML-escaped."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
