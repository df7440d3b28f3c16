"""The manifest's sections and the root schema assembled from them.

Each module here exports ``SECTIONS``: top-level key -> spec. A feature adds
its section by adding its module to ``_MODULES``.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module

from fdl.manifest.schema import Obj, Spec
from fdl.manifest.sections._command_schema import choice_matches, convert, item_type
from fdl.manifest.sections._structured import FIELDS, SECTIONS

__all__ = ["FIELDS", "SECTIONS", "choice_matches", "convert", "item_type", "root_spec"]

_MODULES = ("core", "libtorch", "images", "ci", "deploy")


@cache
def root_spec() -> Obj:
    """The schema of a project's root manifest (all sections)."""
    fields: dict[str, Spec] = {}
    for name in _MODULES:
        module = import_module(f"{__name__}.{name}")
        fields.update(module.SECTIONS)
    validators = []
    core = import_module(f"{__name__}.core")
    validators.extend(core.ROOT_VALIDATORS)
    return Obj(fields, description="fdl project manifest (fdl.yml)", validators=validators)
