"""The manifest's sections and the root schema assembled from them.

Each module here exports ``SECTIONS``: top-level key -> spec. A feature adds
its section by adding its module to ``_MODULES``.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module

from fdl.manifest.schema import Obj, Spec
from fdl.manifest.sections._command_schema import SCHEMA as COMMAND_SCHEMA
from fdl.manifest.sections._command_schema import choice_matches, convert, item_type
from fdl.manifest.sections._structured import FIELDS, SECTIONS

TYPE_CHECKING = False  # typing stays out of `fdl config show` (start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "COMMAND_SCHEMA",
    "CUSTOM_TAGS",
    "FIELDS",
    "SCHEMASTORE_ENTRY",
    "SCHEMA_ID",
    "SECTIONS",
    "choice_matches",
    "convert",
    "env_aliases",
    "item_type",
    "root_spec",
    "schema_document",
]

# Where the schema is meant to be published (SchemaStore's catalog), and its catalog entry.
SCHEMA_ID = "https://json.schemastore.org/fdl.json"
SCHEMASTORE_ENTRY = {
    "name": "fdl",
    "description": "fdl project manifest: commands, libtorch variants, images, CI and "
    "benchmarks and deployment of a libtorch training project (floDl, tch-rs, C++)",
    "fileMatch": ["fdl.yml", "fdl.yaml", "fdl.*.yml", "fdl.*.yaml", "fdl.yml.example"],
    "url": SCHEMA_ID,
}
# fdl's YAML tags, as the YAML language server's `yaml.customTags` setting declares them.
CUSTOM_TAGS = ("!append sequence", "!replace mapping", "!secret scalar", "!secret mapping")

_MODULES = ("core", "libtorch", "images", "ci", "bench", "deploy", "cluster")


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
    return Obj(
        fields,
        description="fdl project manifest (fdl.yml)",
        validators=validators,
        renamed=core.RENAMED_ROOT_KEYS,
    )


@cache
def env_aliases() -> dict[str, tuple[str, ...]]:
    """Environment variables besides ``FDL__*`` that set one key (a section module's
    ``ENV_ALIASES``): ``FDL_LIBTORCH_MIRROR`` -> ``libtorch.mirror``."""
    aliases: dict[str, tuple[str, ...]] = {}
    for name in _MODULES:
        aliases.update(getattr(import_module(f"{__name__}.{name}"), "ENV_ALIASES", {}))
    return aliases


def schema_document() -> dict[str, object]:
    """The JSON Schema of fdl.yml (and its overlays) for editors and SchemaStore."""
    document: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "fdl.yml",
        **root_spec().json_schema(),
    }
    document["description"] = SCHEMASTORE_ENTRY["description"]
    # inherit-from is consumed before validation but belongs in every file.
    document.setdefault("properties", {})["inherit-from"] = {
        "type": "string",
        "description": "A manifest this file inherits from (relative path).",
    }
    return document
