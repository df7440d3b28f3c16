"""The one upward search: a directory and its parents up to the file system root.

Used to find the project's manifest (fdl.manifest) and the project root that holds its
libtorch variants (fdl.paths); kept free of heavy imports (it runs on every start).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fdl.errors import ManifestError

__all__ = ["EXAMPLE_SUFFIXES", "MANIFEST_NAMES", "only_one", "upward"]

# The names a project manifest has, and the suffixes of its read-only examples.
MANIFEST_NAMES = ("fdl.yml", "fdl.yaml", "fdl.json")
EXAMPLE_SUFFIXES = (".example", ".dist")


def upward(start: Path) -> Iterator[Path]:
    """``start`` (resolved) and each of its parents, nearest first."""
    current = start.resolve()
    yield current
    yield from current.parents


def only_one(found: list[Path], where: str, why: str, hint: str) -> Path | None:
    """The one file of ``found`` (None when there is none): where two compete (``fdl.yml``
    beside ``fdl.yaml``), fdl does not pick one silently.

    Raises:
        ManifestError: ``{where}: found both {names}{why}``, with ``hint``.
    """
    if len(found) > 1:
        names = " and ".join(p.name for p in found)
        raise ManifestError(f"{where}: found both {names}{why}", hint=hint)
    return found[0] if found else None
