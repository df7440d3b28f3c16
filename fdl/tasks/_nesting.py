"""Finding the project's root manifest from inside a nested manifest's directory.

``fdl`` started in ``train/`` finds ``train/fdl.yml`` first; when that is a
nested manifest of ``../fdl.yml`` (by ``path:`` or the ``<name>/`` convention),
the project is the enclosing one, so ``fdl train quick`` works from anywhere
inside the project.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # on the path of `fdl config show` (start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["enclosing_manifest"]


def _commands(path: Path) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader: ~10x faster
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    commands = data.get("commands") if isinstance(data, dict) else None
    return commands if isinstance(commands, dict) else {}


def _refers_to(manifest: Path, directory: Path) -> bool:
    """Whether ``manifest`` has a command whose nested manifest lives in ``directory``."""
    here = manifest.parent
    for name, value in _commands(manifest).items():
        spec = value if isinstance(value, dict) else {}
        if spec.get("run") is not None:
            continue
        target = spec.get("path") or str(name)
        if isinstance(target, str) and (here / target).resolve() == directory:
            return True
    return False


def _nearest_above(directory: Path) -> Path | None:
    """The manifest of the nearest ancestor of ``directory`` that has one."""
    from fdl.manifest import find_in_directory

    child, parent = directory, directory.parent
    while parent != child:
        found = find_in_directory(parent)
        if found is not None:
            return found.path
        child, parent = parent, parent.parent
    return None


def enclosing_manifest(path: Path) -> Path:
    """The root manifest of the project ``path`` belongs to (``path`` itself if it is the root)."""
    from fdl.errors import ManifestError

    current = path.resolve()
    while True:
        try:
            above = _nearest_above(current.parent)
        except ManifestError:
            return current
        if above is None or not _refers_to(above, current.parent):
            return current
        current = above.resolve()
