"""Generated files kept as template files (``fdl/data/<folder>/<name>.in``), in CMake's
``configure_file`` syntax: ``@name@`` is replaced by a value, nothing else is touched.

Every value passes :func:`fdl._grammar.fill`'s grammar of ``kind`` (``cmake``,
``linker``, ``line``) first: text read from an index or a wheel never becomes code.
"""

from __future__ import annotations

import functools
import re

from fdl._assets import data_dir
from fdl._grammar import fill

__all__ = ["render", "template"]

_PLACE = re.compile(r"@(\w+)@")


@functools.cache
def template(name: str) -> str:
    """The text of the shipped template ``name`` (``libtorch/TorchConfig.cmake.in``)."""
    return (data_dir() / name).read_text(encoding="utf-8")


def render(name: str, kind: str, *, source: str, hint: str, **values: str) -> str:
    """The template ``name`` with its ``@value@`` places filled, every value checked
    against the grammar ``kind`` (:func:`fdl._grammar.fill`; ``source`` and ``hint`` say
    where a refused value came from and what to do).

    Raises:
        FdlError: a value outside the grammar (the error ``fill`` raises).
        KeyError: a place the values do not fill.
    """
    text = template(name).replace("{", "{{").replace("}", "}}")
    return fill(kind, _PLACE.sub(r"{\1}", text), source=source, hint=hint, **values)
