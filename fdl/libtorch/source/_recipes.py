"""Build recipes: named YAML files with archs, CUDA, a pinned PyTorch and switches.

Built-in recipes ship with fdl (the top-level ``recipes/`` folder, packaged into the wheel);
a project adds its own in ``<project>/recipes/<name>.yml``, which win over built-in ones
of the same name. A recipe takes the keys of ``libtorch.build`` (except ``recipe``,
``source``, ``name``, ``activate``) plus ``description``, and is validated with the same
schema, errors pointing at the recipe's file and line.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from fdl._assets import asset_dir
from fdl.errors import Location, ManifestError, UsageError
from fdl.libtorch.source._request import BuildRequest, build_fields, request_from_mapping
from fdl.manifest.schema import Checker, Obj

__all__ = ["Recipe", "find_recipe", "list_recipes", "load_recipe", "recipe_dirs"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True)
class Recipe:
    """A loaded recipe.

    Attributes:
        name: ``pascal-blackwell``.
        path: Its file.
        description: Its one-line summary.
        request: Its settings, each with the recipe's file:line as origin.
        builtin: True when it ships with fdl.
    """

    name: str
    path: Path
    description: str
    request: BuildRequest
    builtin: bool


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


def list_recipes(project_dir: Path | None = None) -> list[Recipe]:
    """Every recipe visible from the project (project ones shadow built-in ones), by name."""
    found: dict[str, Recipe] = {}
    for directory, builtin in recipe_dirs(project_dir):
        for name, path in _files(directory).items():
            if name not in found:
                found[name] = load_recipe(path, builtin=builtin)
    return [found[name] for name in sorted(found)]


def find_recipe(name: str, project_dir: Path | None = None) -> Path:
    """The file of recipe ``name`` (a name, or a path to a .yml file).

    Raises:
        UsageError: no such recipe (with the known names).
    """
    candidate = Path(name).expanduser()
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


def load_recipe(path: Path, *, builtin: bool = False) -> Recipe:
    """Read and validate a recipe file.

    Raises:
        ManifestError: unreadable YAML or values that do not fit the schema (file:line).
    """
    from fdl.manifest import LayerKind, MapNode, node_at, parse_text

    source = f"recipe {path.stem}" if builtin else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"cannot read recipe {path}: {exc.strerror or exc}") from None
    node = parse_text(text, source, LayerKind.BASE, path)
    if not isinstance(node, MapNode):
        raise ManifestError(
            f"{source}: a recipe is a mapping of build settings",
            location=Location(source, 1, 1, path),
            hint="see recipes/README.md for the format",
        )
    checker = Checker()
    spec = Obj(build_fields(recipe=True), required=("description",))
    data = spec.check(node, (), checker)
    if checker.errors:
        if len(checker.errors) == 1:
            raise checker.errors[0]
        from fdl.errors import ManifestErrors

        raise ManifestErrors(checker.errors)

    def origin_of(key: tuple[str, ...]) -> tuple[str, Location | None]:
        found = node_at(node, key)
        if found is None:
            return f"recipe {path.stem}", None
        location = found.origin.location()
        return f"recipe {path.stem} ({location})", location

    request = request_from_mapping(data, origin_of)
    return Recipe(path.stem, path, str(data.get("description") or ""), request, builtin)
