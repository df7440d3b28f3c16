"""Extract into a staging directory beside the target, then rename it into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fdl.archive._plan import ArchiveError
from fdl.errors import EnvironmentProblem

__all__ = ["ExtractResult", "check_space", "make_staging", "publish", "remove_stale_staging"]


@dataclass(frozen=True)
class ExtractResult:
    """What an extraction created.

    Attributes:
        target: The directory now holding the archive's content.
        files: Regular files written.
        dirs: Directories created (explicit or implied).
        symlinks: Symlinks created (all of them inside the target).
        bytes: Bytes of file content written.
        skipped: Members left out because they are outside ``strip_prefix``.
    """

    target: Path
    files: int
    dirs: int
    symlinks: int
    bytes: int
    skipped: tuple[str, ...]


def _staging_prefix(target: Path) -> str:
    return f".{target.name}.staging-"


def _old_prefix(target: Path) -> str:
    return f".{target.name}.old-"


def make_staging(target: Path) -> Path:
    """A fresh, empty directory beside ``target`` (same filesystem, so rename is atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=_staging_prefix(target), dir=target.parent))


def check_space(directory: Path, needed: int, archive: str) -> None:
    """Refuse to start when the archive's content cannot fit."""
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise EnvironmentProblem(
            f"not enough disk space to extract {archive}: it needs {needed / 1e9:.2f} GB, "
            f"{free / 1e9:.2f} GB are free in {directory}",
            hint="free some space, or install to another directory",
        )


def publish(staging: Path, target: Path, *, replace: bool) -> None:
    """Rename ``staging`` to ``target``; an existing target is swapped out only if ``replace``."""
    if not (target.exists() or target.is_symlink()):
        os.rename(staging, target)
        return
    if not replace:
        raise ArchiveError(
            f"{target} already exists",
            hint="remove it first, or ask for it to be replaced",
        )
    old = Path(tempfile.mkdtemp(prefix=_old_prefix(target), dir=target.parent))
    os.rename(target, old / "content")
    try:
        os.rename(staging, target)
    except OSError:
        os.rename(old / "content", target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def remove_stale_staging(target: Path) -> list[Path]:
    """Remove staging and swapped-out directories that crashed runs left beside ``target``.

    Only call it while holding the lock that guards ``target``: another process
    could be extracting into one of them.
    """
    removed: list[Path] = []
    if not target.parent.is_dir():
        return removed
    for child in sorted(target.parent.iterdir()):
        name = child.name
        if name.startswith((_staging_prefix(target), _old_prefix(target))) and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
    return removed
