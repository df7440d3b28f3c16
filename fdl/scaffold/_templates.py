"""The ``fdl init`` templates: their data files and the jinja2 environment.

Templates live under the shipped ``templates/scaffold/``: ``scaffold.yml`` (what all
share), ``common/`` (files every project gets) and one directory per template with
``template.yml``, ``fdl.yml.j2``, ``fdl.ci.yml.j2`` and ``files/`` (the project's own
files: ``.j2`` files are rendered, the others copied as they are).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl._assets import asset_dir, template_environment
from fdl.errors import UsageError

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "TEMPLATES",
    "Template",
    "renamed_command",
    "render",
    "scaffold_data",
    "template",
    "template_files",
]

TEMPLATES = ("flodl", "cpp", "tch")


def _root() -> Path:
    return asset_dir("templates") / "scaffold"


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping")
    return data


@dataclass(frozen=True)
class Template:
    """One template and its ``template.yml``.

    Attributes:
        name: ``flodl`` or ``cpp``.
        version: Bumped when the generated files change; recorded in the answers file.
        description: One line for help and listings.
        build_dir: Where the project's build goes (ignored by git and docker).
        reserved_names: Project names the template refuses.
        markers: Files that make a directory a project of this kind (``Cargo.toml``).
        framework: The framework release the template writes (``("flodl", "0.8.0")``),
            whose torch the project must use; None for a free template (``cpp``).
        data: The whole ``template.yml``.
        directory: The template's directory.
    """

    name: str
    version: int
    description: str
    build_dir: str
    reserved_names: tuple[str, ...]
    markers: tuple[str, ...]
    framework: tuple[str, str] | None
    data: dict[str, Any]
    directory: Path


@functools.cache
def scaffold_data() -> dict[str, Any]:
    """``templates/scaffold/scaffold.yml``: what every template shares."""
    return _read_yaml(_root() / "scaffold.yml")


@functools.cache
def template(name: str) -> Template:
    """The template called ``name``.

    Raises:
        UsageError: no such template.
    """
    if name not in TEMPLATES:
        raise UsageError(
            f"unknown template {name!r}", hint=f"choose one of: {', '.join(TEMPLATES)}"
        )
    directory = _root() / name
    data = _read_yaml(directory / "template.yml")
    reserved = list(data.get("reserved_names") or ())
    if data.get("language") == "rust":
        data["rust"] = scaffold_data()["rust"]
        reserved += data["rust"]["reserved_names"]
    pin = data.get("framework")
    return Template(
        name=name,
        version=int(data["version"]),
        description=str(data["description"]),
        build_dir=str(data["build_dir"]),
        reserved_names=tuple(str(n) for n in reserved),
        markers=tuple(str(n) for n in data.get("markers") or ()),
        framework=(str(pin["name"]), str(pin["version"])) if pin else None,
        data=data,
        directory=directory,
    )


def renamed_command(name: str) -> tuple[str, str] | None:
    """(template, the name now) when an earlier version of a template wrote a command
    called ``name`` (its ``renamed_commands``: ``cuda-build`` is ``gpu-build``)."""
    for chosen in TEMPLATES:
        now = (template(chosen).data.get("renamed_commands") or {}).get(name)
        if now:
            return chosen, str(now)
    return None


def template_files(chosen: Template, part: str = "files") -> list[tuple[str, Path]]:
    """The template's own files in ``part`` (``files``, or an optional part such as
    ``hf``): (path below the part, source file), sorted."""
    files = chosen.directory / part
    found = []
    for source in sorted(files.rglob("*")):
        if source.is_file():
            relative = source.relative_to(files).as_posix()
            found.append((relative, source))
    return found


def _environment() -> jinja2.Environment:
    return template_environment(_root())


def render(name: str, values: dict[str, Any]) -> str:
    """Render ``templates/scaffold/<name>`` with ``values``; ends with one newline."""
    text = _environment().get_template(name).render(**values)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n") + "\n"
