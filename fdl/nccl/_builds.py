"""Built NCCLs beside the libtorch variants: ``libtorch/nccl/builds/v<ver>-<archs>/``.

Each build holds ``lib/libnccl.so.2``, ``include/`` and ``nccl.json`` (what was built and for
which variant). Commands and ``fdl probe`` load the build made for the active variant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RECORD", "BuiltNccl", "builds_dir", "built_for", "list_builds"]

RECORD = "nccl.json"
_LIMIT = 64 << 10


@dataclass(frozen=True)
class BuiltNccl:
    """One installed NCCL build."""

    path: Path
    version: str
    tag: str
    archs: tuple[str, ...]
    variant: str | None

    @property
    def library(self) -> Path:
        return self.path / "lib" / "libnccl.so.2"


def builds_dir(libtorch_dir: Path) -> Path:
    return libtorch_dir / "nccl" / "builds"


def _read(path: Path) -> BuiltNccl | None:
    from fdl._files import NotARegularFile, read_small_text

    try:
        data = json.loads(read_small_text(path / RECORD, limit=_LIMIT) or "")
    except (NotARegularFile, OSError, ValueError):
        return None
    if not isinstance(data, dict) or not (path / "lib" / "libnccl.so.2").is_file():
        return None
    variant = data.get("variant")
    return BuiltNccl(
        path=path,
        version=str(data.get("version", "")),
        tag=str(data.get("tag", "")),
        archs=tuple(str(a) for a in data.get("archs") or ()),
        variant=str(variant) if isinstance(variant, str) else None,
    )


def list_builds(libtorch_dir: Path) -> list[BuiltNccl]:
    """Every complete build (with its record and its library), sorted by directory name."""
    try:
        children = sorted(builds_dir(libtorch_dir).iterdir())[:256]
    except OSError:
        return []
    found = [_read(child) for child in children if child.is_dir() and not child.is_symlink()]
    return [b for b in found if b is not None]


def built_for(libtorch_dir: Path, variant: str | None) -> BuiltNccl | None:
    """The build made for ``variant`` (the newest NCCL when several were)."""
    if variant is None:
        return None
    from fdl.compat import version_key

    matching = [b for b in list_builds(libtorch_dir) if b.variant == variant]
    if not matching:
        return None

    def key(build: BuiltNccl) -> tuple[tuple[int, ...], str]:
        try:
            return version_key(build.version), build.path.name
        except ValueError:
            return (), build.path.name

    return max(matching, key=key)
