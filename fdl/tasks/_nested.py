"""Nested manifests as ``fdl --help`` and the resolver read them: what kind a command
is, the nested manifest of a directory, and the presets that do not fit its schema.

Apart from :mod:`fdl.tasks._resolve` (and its dataclasses) so that listing a project's
commands does not load the resolver.
"""

from __future__ import annotations

from fdl.errors import Location, ManifestError, ManifestErrors
from fdl.manifest import Manifest, MapNode, display_name
from fdl.manifest.sections.core import PRESET_KEYS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["command_kind", "load_nested", "preset_problems"]


def command_kind(spec: dict[str, Any] | None) -> str:
    """``run``, ``path`` or ``preset`` for a (validated) command entry."""
    if not spec:
        return "path"
    if spec.get("run") is not None:
        return "run"
    if spec.get("path") is not None:
        return "path"
    if any(spec.get(key) for key in PRESET_KEYS):
        return "preset"
    return "path"


def _relocate(error: ManifestError, root: Path) -> ManifestError:
    location = error.location
    if location is None or location.path is None:
        return error
    moved = Location(
        display_name(location.path, root), location.line, location.column, location.path
    )
    return ManifestError(error.message, hint=error.hint, location=moved, details=error.details)


def load_nested(directory: Path, env: str | None, root: Path) -> Manifest | None:
    """The nested manifest in ``directory`` (with its ``env`` overlay when present).

    Errors name files relative to the project ``root`` (``sub/fdl.yml:3:5``).

    Raises:
        ManifestError: the nested manifest is invalid.
    """
    from fdl.manifest import load_directory_manifest
    from fdl.manifest.sections.nested import nested_spec

    try:
        return load_directory_manifest(directory, env=env, schema=nested_spec())
    except ManifestErrors as errors:
        raise ManifestErrors([_relocate(e, root) for e in errors.errors]) from None
    except ManifestError as error:
        raise _relocate(error, root) from None


def preset_problems(nested: Manifest, root: Path) -> dict[str, list[ManifestError]]:
    """The presets of ``nested`` whose option values do not fit its schema, with the
    errors (files named relative to the project ``root``). Such a preset is refused when
    it runs; the rest of the manifest works."""
    from fdl.manifest.sections.nested import preset_problems as find

    return {
        name: [_relocate(error, root) for error in errors]
        for name, errors in find(nested.tree, _probed_tree(nested)).items()
    }


def _probed_tree(nested: Manifest) -> MapNode | None:
    """The cached ``--fdl-schema`` answer of an entry, as a tree with a ``schema`` key
    (never probes: a missing or stale cache gives None)."""
    if not nested.data.get("entry"):
        return None
    import os

    # the common case (no cache) costs a stat, not the import of the probe module (start-up)
    if not os.path.lexists(nested.directory / ".fdl" / "schema-cache"):
        return None
    import json

    from fdl.manifest import LayerKind, parse_text
    from fdl.tasks._probe import cache_file, cached_schema

    schema = cached_schema(nested)
    if schema is None:
        return None
    path = cache_file(nested).with_suffix(".json")
    tree = parse_text(json.dumps({"schema": schema}), str(path), LayerKind.BASE, path)
    return tree if isinstance(tree, MapNode) else None
