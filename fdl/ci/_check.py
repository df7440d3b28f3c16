"""Writing the generated files, and checking that the files on disk are what the
manifest produces now (``fdl ci check``: drift is a missing, changed or stale file)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fdl.ci._render import GeneratedFile

__all__ = ["Drift", "FileChange", "find_drift", "write_files"]


@dataclass(frozen=True)
class FileChange:
    """One generated file that differs from the disk.

    Attributes:
        path: Relative to the repository root.
        state: ``missing`` (not on disk), ``changed`` or ``stale`` (on disk, no longer made).
        diff: A unified diff from the disk's text to the wanted text.
    """

    path: str
    state: str
    diff: str


@dataclass(frozen=True)
class Drift:
    """What ``fdl ci check`` found: nothing (``ok``), or the files that differ."""

    changes: tuple[FileChange, ...]
    checked: int

    @property
    def ok(self) -> bool:
        return not self.changes

    @property
    def diff(self) -> str:
        return "".join(change.diff for change in self.changes)


def _stale(root: Path, owned: Sequence[str], wanted: set[str]) -> list[str]:
    """Files in the directories fdl owns that the matrix no longer makes."""
    found: list[str] = []
    for directory in owned:
        folder = root / directory
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            relative = path.relative_to(root).as_posix()
            generated = path.name.endswith((".Dockerfile", ".dockerignore"))
            if path.is_file() and generated and relative not in wanted:
                found.append(relative)
    return found


def _diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}" if old else "/dev/null",
        tofile=f"b/{path}" if new else "/dev/null",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text


def find_drift(root: Path, files: Sequence[GeneratedFile], owned: Sequence[str] = ()) -> Drift:
    """Compare ``files`` with what is under ``root``.

    Args:
        root: The repository root (or the directory given with ``-o``).
        files: What the manifest produces now.
        owned: Directories (relative to ``root``) whose other Dockerfiles are stale.
    """
    changes: list[FileChange] = []
    for item in files:
        path = root / item.path
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == item.text:
            continue
        state = "missing" if current is None else "changed"
        changes.append(FileChange(item.path, state, _diff(current or "", item.text, item.path)))
    for relative in _stale(root, owned, {item.path for item in files}):
        text = (root / relative).read_text(encoding="utf-8", errors="replace")
        changes.append(FileChange(relative, "stale", _diff(text, "", relative)))
    return Drift(tuple(sorted(changes, key=lambda change: change.path)), len(files))


def write_files(
    root: Path, files: Sequence[GeneratedFile], owned: Sequence[str] = ()
) -> list[FileChange]:
    """Write what differs (and delete stale files); return what changed."""
    drift = find_drift(root, files, owned)
    texts = {item.path: item.text for item in files}
    for change in drift.changes:
        path = root / change.path
        if change.state == "stale":
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[change.path], encoding="utf-8")
    return list(drift.changes)
