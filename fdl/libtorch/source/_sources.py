"""Gathering a request: CLI flags over ``libtorch.build`` in fdl.yml (with overlays) over a recipe."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fdl.errors import Location, ManifestErrors, UsageError
from fdl.libtorch.source._recipes import find_recipe, load_recipe
from fdl.libtorch.source._request import (
    BuildRequest,
    Setting,
    build_spec,
    located_error,
    merge_requests,
    request_from_mapping,
)

if TYPE_CHECKING:
    from fdl.manifest import Manifest

__all__ = ["gather_request", "manifest_request"]

KEY = ("libtorch", "build")


def manifest_request(manifest: Manifest) -> BuildRequest:
    """The ``libtorch.build`` section of the merged manifest, each value with its file:line.

    Raises:
        ManifestError: a value does not fit the schema.
    """
    from fdl.manifest import MapNode
    from fdl.manifest.schema import Checker

    node = manifest.node(KEY)
    if node is None or not isinstance(node, MapNode):
        if node is not None:
            checker = Checker()
            build_spec().check(node, KEY, checker)
            if checker.errors:
                raise checker.errors[0]
        return BuildRequest()
    checker = Checker()
    data = build_spec().check(node, KEY, checker)
    if checker.errors:
        raise checker.errors[0] if len(checker.errors) == 1 else ManifestErrors(checker.errors)

    def origin_of(path: tuple[str, ...]) -> tuple[str, Location | None]:
        origin = manifest.origin((*KEY, *path))
        if origin is None:
            return "fdl.yml", None
        return f"{origin} (libtorch.build.{'.'.join(path)})", origin.location()

    return request_from_mapping(data, origin_of, base_dir=manifest.directory)


def gather_request(
    cli: BuildRequest, manifest: Manifest | None, project_dir: Path | None
) -> BuildRequest:
    """Merge the layers: recipe < fdl.yml (with overlays) < command line.

    Raises:
        UsageError, ManifestError: unknown recipe, invalid values.
    """
    from_manifest = manifest_request(manifest) if manifest is not None else BuildRequest()
    chosen: Setting[str] | None = cli.recipe or from_manifest.recipe
    layers = [from_manifest, cli]
    if chosen is not None:
        try:
            path = find_recipe(str(chosen.value), project_dir)
        except UsageError as exc:
            raise located_error(chosen, exc.message, exc.hint) from None
        builtin = project_dir is None or not path.is_relative_to(project_dir)
        recipe = load_recipe(path, builtin=builtin)
        layers.insert(0, recipe.request)
    merged = merge_requests(*layers)
    if chosen is not None:
        from dataclasses import replace

        merged = replace(merged, recipe=chosen)
    return merged
