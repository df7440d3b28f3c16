"""The request of a build, read from the merged manifest.

Recipe, ``libtorch.build`` in fdl.yml (with overlays, ``FDL__`` variables and ``--set``)
and the command line's options are layers of one manifest (see
:func:`fdl.libtorch.recipes.recipe_layer` and :func:`fdl.manifest.value_layer`), so each
value of the request carries the origin the manifest engine gave it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from fdl.errors import Location, ManifestErrors
from fdl.libtorch.build._request import BuildRequest, Setting, build_spec, request_from_mapping
from fdl.libtorch.recipes import recipe_layer
from fdl.manifest import (
    LayerKind,
    Manifest,
    MapNode,
    Node,
    Origin,
    ScalarNode,
    merge_layers,
    node_at,
    value_layer,
)
from fdl.manifest.schema import Checker

__all__ = ["build_request", "check_source_release", "manifest_request", "tree_request"]

KEY = ("libtorch", "build")


def check_source_release(
    request: BuildRequest, torch: str, manifest: Manifest | None, cwd: Path
) -> None:
    """Refuse a ``--source`` checkout whose release the project's framework cannot compile
    against (its version is known only once the checkout is read; ``torch`` is the plan's).

    Raises:
        ManifestError, UsageError: it cannot (at the ``source`` setting).
    """
    if request.source is None:
        return
    from fdl.libtorch import framework_torch
    from fdl.libtorch.build._request import located_error

    decision = framework_torch(manifest, None if manifest is not None else cwd)
    reason = decision.refusal(torch)
    if reason:
        raise located_error(
            request.source,
            f"the checkout {request.source.value} is torch {torch}: {reason}",
            f"check out v{decision.torch} instead" if decision.torch else None,
        )


def _framework_torch(
    request: BuildRequest, merged: Node | None, manifest: Manifest | None, cwd: Path
) -> BuildRequest:
    """The torch a build builds: what the request says (refused when the project's
    framework cannot compile against it), else ``libtorch.torch``, else the framework's.

    `fdl setup` and the official downloads decide the same way: one release per project.
    """
    from fdl.compat import resolve_torch_version
    from fdl.errors import UsageError
    from fdl.libtorch import framework_torch
    from fdl.libtorch.build._request import located_error

    decision = framework_torch(manifest, None if manifest is not None else cwd)
    if request.torch is not None:
        try:
            full = resolve_torch_version(str(request.torch.value))
        except UsageError:
            return request  # the planner reports an unknown release at its origin
        reason = decision.refusal(full)
        if reason:
            raise located_error(
                request.torch,
                f"torch {request.torch.value}: {reason}",
                f"build torch {decision.torch or 'the release the framework needs'} (drop "
                f"the pin); to build {full} anyway, set libtorch.framework-check: false",
            )
        return request
    if request.source is not None:
        return request
    pinned = node_at(merged, ("libtorch", "torch")) if merged is not None else None
    if isinstance(pinned, ScalarNode) and pinned.value not in (None, ""):
        origin = pinned.origin
        where = origin.location() if origin.line else None
        value = pinned.raw or str(pinned.value)
        return replace(request, torch=Setting(value, f"{origin} (libtorch.torch)", where))
    if decision.torch is not None:
        return replace(request, torch=Setting(decision.torch, decision.origin))
    return request


def tree_request(tree: Node | None, base_dir: Path) -> BuildRequest:
    """The ``libtorch.build`` values of a merged tree, each with where it was written.

    Args:
        tree: The merged values (a manifest's tree, or merged layers outside a project).
        base_dir: Where a relative ``source`` starts (the manifest's directory).

    Raises:
        ManifestError: a value does not fit the schema (at its file:line).
    """
    node = node_at(tree, KEY) if tree is not None else None
    if node is None:
        return BuildRequest()
    checker = Checker()
    data = build_spec().check(node, KEY, checker)
    if checker.errors:
        raise checker.errors[0] if len(checker.errors) == 1 else ManifestErrors(checker.errors)
    if not isinstance(node, MapNode):
        return BuildRequest()

    def origin_of(path: tuple[str, ...]) -> tuple[str, Location | None]:
        found = node_at(node, path)
        if found is None:
            return "fdl.yml", None
        origin = found.origin
        if origin.layer in (LayerKind.FLAG, LayerKind.ENV, LayerKind.SET) or not origin.line:
            return str(origin), None
        if origin.layer is LayerKind.RECIPE:
            return f"{origin} ({'.'.join(path)})", origin.location()
        return f"{origin} (libtorch.build.{'.'.join(path)})", origin.location()

    return request_from_mapping(data, origin_of, base_dir=base_dir)


def manifest_request(manifest: Manifest) -> BuildRequest:
    """:func:`tree_request` of a merged manifest."""
    return tree_request(manifest.tree, manifest.directory)


def build_request(
    manifest: Manifest | None, options: Mapping[str, tuple[object, str | Origin]], cwd: Path
) -> BuildRequest:
    """What ``fdl libtorch build`` with ``options`` asks for in this project.

    The options (``{"archs": ("6.1;12.0", "--archs")}``) are the top layer over the
    manifest's; the recipe they or the manifest name is the lowest. Outside a project
    (``manifest`` None) there are only the recipe and the options.

    Raises:
        UsageError, ManifestError: an unknown recipe, a value that does not fit (located).
    """
    given = dict(options)
    fresh = given.pop("fresh", None)
    fetch_only = given.pop("fetch_only", None)
    source = given.get("source")
    if source is not None and not Path(os.path.expanduser(str(source[0]))).is_absolute():
        given["source"] = (str(cwd / str(source[0])), source[1])
    kept = manifest.layers if manifest is not None else []
    layers = [layer for layer in kept if layer.kind is not LayerKind.RECIPE]
    paths: dict[tuple[str, ...], tuple[object, str | Origin]] = {
        (*KEY, k): v for k, v in given.items()
    }
    below = merge_layers(layers) if given.get("cache", ("",))[0] == "sccache" else None
    if below is not None and isinstance(node_at(below, (*KEY, "cache")), MapNode):
        # --cache sccache keeps the farm (cache.dist) of fdl.yml; another cache replaces it.
        paths[(*KEY, "cache", "kind")] = paths.pop((*KEY, "cache"))
    flags = value_layer(LayerKind.FLAG, "command line", paths)
    if flags is not None:
        layers.append(flags)
    project_dir = manifest.directory if manifest is not None else None
    recipe = recipe_layer(merge_layers(layers), project_dir)
    if recipe is not None:
        layers.insert(0, recipe)
    merged = merge_layers(layers)
    request = tree_request(merged, project_dir or cwd)
    request = _framework_torch(request, merged, manifest, cwd)
    if fresh is not None and fresh[0]:
        request = replace(request, fresh=Setting(True, str(fresh[1])))
    if fetch_only is not None and fetch_only[0]:
        request = replace(request, fetch_only=Setting(True, str(fetch_only[1])))
    return request
