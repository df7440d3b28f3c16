"""Build recipes: named YAML files with archs, CUDA, a pinned PyTorch and switches.

Built-in recipes ship with fdl (the top-level ``recipes/`` folder, packaged into the wheel);
a project adds its own in ``<project>/recipes/<name>.yml``, which win over built-in ones
of the same name. A recipe takes the keys of ``libtorch.build`` (except ``recipe``,
``source``, ``name``, ``activate``) plus ``description``, and is validated with the same
schema, errors pointing at the recipe's file and line.

A recipe is a layer of the manifest, below everything else: ``libtorch.build.recipe``
(or ``fdl libtorch build --recipe``) names it, :func:`recipe_layer` reads it, and its
values then carry the recipe's file:line like every other value (``fdl config explain
libtorch.build.archs`` and the build plan show the same origins).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from fdl._assets import asset_dir
from fdl._files import NotARegularFile, read_text_file, reason_of
from fdl.errors import Location, ManifestError, ManifestErrors, UsageError
from fdl.manifest import (
    Layer,
    LayerKind,
    MapNode,
    Node,
    ScalarNode,
    display_name,
    nested_layer,
    node_at,
    parse_text,
)
from fdl.manifest.schema import Checker, Obj
from fdl.manifest.sections.libtorch_build import build_fields

__all__ = ["Recipe", "find_recipe", "list_recipes", "load_recipe", "recipe_dirs", "recipe_layer"]

KEY = ("libtorch", "build")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True)
class Recipe:
    """A loaded recipe.

    Attributes:
        name: ``pascal-blackwell``.
        path: Its file.
        description: Its one-line summary.
        builtin: True when it ships with fdl.
        settings: Its values (keys of ``libtorch.build``), each at its line in the file.
    """

    name: str
    path: Path
    description: str
    builtin: bool
    settings: MapNode


def recipe_dirs(project_dir: Path | None) -> list[tuple[Path, bool]]:
    """Where recipes are looked up, first match wins: (directory, is_builtin)."""
    dirs: list[tuple[Path, bool]] = []
    if project_dir is not None:
        dirs.append((project_dir / "recipes", False))
    with contextlib.suppress(FileNotFoundError):  # a wheel built without its assets
        dirs.append((asset_dir("recipes"), True))
    return dirs


def _files(directory: Path) -> dict[str, Path]:
    if not directory.is_dir():
        return {}
    return {
        path.stem: path
        for path in sorted(directory.iterdir())
        if path.suffix in SUFFIXES and path.is_file() and _NAME.match(path.stem)
    }


def list_recipes(
    project_dir: Path | None = None, problems: list[ManifestError] | None = None
) -> list[Recipe]:
    """Every recipe visible from the project (project ones shadow built-in ones), by name.

    A recipe file that cannot be read or does not fit the schema is left out and its
    error appended to ``problems`` (raised when None): one broken file does not hide the
    others.
    """
    found: dict[str, Recipe] = {}
    shadowed: set[str] = set()
    for directory, builtin in recipe_dirs(project_dir):
        for name, path in _files(directory).items():
            if name in found or name in shadowed:
                continue
            try:
                found[name] = load_recipe(path, builtin=builtin, project_dir=project_dir)
            except ManifestError as exc:
                if problems is None:
                    raise
                problems.append(exc)
                shadowed.add(name)
    return [found[name] for name in sorted(found)]


def find_recipe(name: str, project_dir: Path | None = None) -> Path:
    """The file of recipe ``name`` (a name, or a path to a .yml file).

    Raises:
        UsageError: no such recipe (with the known names).
    """
    candidate = Path(os.path.expanduser(name))
    if candidate.suffix in SUFFIXES and candidate.is_file():
        return candidate
    for directory, _ in recipe_dirs(project_dir):
        path = _files(directory).get(name)
        if path is not None:
            return path
    known = sorted({n for d, _ in recipe_dirs(project_dir) for n in _files(d)})
    raise UsageError(
        f"unknown build recipe {name!r}",
        hint=f"known recipes: {', '.join(known) or 'none'}; "
        "or add recipes/<name>.yml to the project",
    )


def load_recipe(path: Path, *, builtin: bool = False, project_dir: Path | None = None) -> Recipe:
    """Read and validate a recipe file.

    Raises:
        ManifestError: unreadable YAML or values that do not fit the schema (file:line).
    """
    if builtin or project_dir is None or not path.is_relative_to(project_dir):
        source = f"recipe {path.stem}"
    else:
        source = display_name(path, project_dir)
    try:
        text = read_text_file(path)  # never blocks on a FIFO; bytes that are not UTF-8 refused
    except OSError as exc:
        raise ManifestError(
            f"cannot read recipe {path}: it {reason_of(exc)}"
            if isinstance(exc, NotARegularFile)
            else f"cannot read recipe {path}: {reason_of(exc)}",
            hint="make it a UTF-8 YAML file of build settings (see recipes/README.md), or "
            "remove it",
        ) from None
    node = parse_text(text, source, LayerKind.RECIPE, path)
    if not isinstance(node, MapNode):
        raise ManifestError(
            f"{source}: a recipe is a mapping of build settings",
            location=Location(source, 1, 1, path),
            hint="see recipes/README.md for the format",
        )
    checker = Checker()
    data = Obj(build_fields(recipe=True), required=("description",)).check(node, (), checker)
    if checker.errors:
        raise checker.errors[0] if len(checker.errors) == 1 else ManifestErrors(checker.errors)
    settings = MapNode(
        {k: v for k, v in node.entries.items() if k != "description"},
        node.origin,
        node.tag,
        {k: o for k, o in node.key_origins.items() if k != "description"},
    )
    return Recipe(path.stem, path, str(data.get("description") or ""), builtin, settings)


def recipe_layer(merged: Node | None, project_dir: Path | None) -> Layer | None:
    """The recipe that ``libtorch.build.recipe`` names in ``merged``, as the lowest layer
    (its values under ``libtorch.build``); None when no recipe is named.

    Raises:
        ManifestError: an unknown recipe named in a manifest (at its ``recipe:`` line), or
            a recipe file that does not fit the schema (at the recipe's line).
        UsageError: an unknown recipe named on the command line (``--recipe``).
    """
    node = node_at(merged, (*KEY, "recipe")) if merged is not None else None
    if not isinstance(node, ScalarNode) or node.value is None:
        return None
    try:
        path = find_recipe(str(node.value), project_dir)
    except UsageError as exc:
        if node.origin.line:
            raise ManifestError(
                exc.message, hint=exc.hint, location=node.origin.location()
            ) from None
        raise UsageError(f"{node.origin}: {exc.message}", hint=exc.hint) from None
    builtin = project_dir is None or not path.is_relative_to(project_dir)
    recipe = load_recipe(path, builtin=builtin, project_dir=project_dir)
    layer = Layer(LayerKind.RECIPE, recipe.settings.origin.source, path, recipe.settings)
    return nested_layer(layer, KEY)
