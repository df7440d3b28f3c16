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

__all__ = ["enclosing_manifest", "nesting"]


def _commands(path: Path) -> dict[str, Any]:
    import yaml

    from fdl._files import NotARegularFile, read_small_text
    from fdl.manifest import MAX_MANIFEST_BYTES

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader: ~10x faster
    try:
        # Bounded: an enclosing fdl.yml is only looked at here; loading it reports its faults.
        text = read_small_text(path, limit=MAX_MANIFEST_BYTES)
        data = yaml.load(text, Loader=loader) if text is not None else None
    except (OSError, NotARegularFile, yaml.YAMLError, RecursionError):
        return {}
    commands = data.get("commands") if isinstance(data, dict) else None
    return commands if isinstance(commands, dict) else {}


def _refers_to(manifest: Path, directory: Path) -> str | None:
    """The command of ``manifest`` whose nested manifest lives in ``directory``, if any."""
    here = manifest.parent
    for name, value in _commands(manifest).items():
        spec = value if isinstance(value, dict) else {}
        if spec.get("run") is not None:
            continue
        target = spec.get("path") or str(name)
        if (
            isinstance(target, str)
            and "\0" not in target
            and (here / target).resolve() == directory
        ):
            return str(name)
    return None


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
    return nesting(path)[0]


def nesting(path: Path) -> tuple[Path, list[str]]:
    """The root manifest of the project ``path`` belongs to, and the command words that lead
    from it to ``path`` (``["flodl-hf", "parity"]`` for ``flodl-hf/parity/fdl.yml``; none
    for the root itself)."""
    from fdl.errors import ManifestError

    current = path.resolve()
    words: list[str] = []
    while True:
        try:
            above = _nearest_above(current.parent)
        except ManifestError:
            return current, words
        name = _refers_to(above, current.parent) if above is not None else None
        if above is None or name is None:
            return current, words
        words.insert(0, name)
        current = above.resolve()
