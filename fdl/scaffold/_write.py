"""The writer: create what is missing, leave identical files alone, never delete.

An existing file that differs is the user's business: it is skipped and reported,
unless ``force`` is given and the file is one fdl generates, which is then
overwritten. Files are written through a temporary file and renamed, so an
interrupted run leaves either the old file or the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fdl._files import atomic_write_text
from fdl.errors import UsageError
from fdl.scaffold._answers import answers_path
from fdl.scaffold._project_files import GENERATED, FileResult, FileSpec, WriteReport

__all__ = ["check_target", "read_existing", "write_project"]


def check_target(directory: Path, *, force: bool) -> None:
    """Refuse a directory that is not empty and not an fdl project, unless ``force``.

    Raises:
        UsageError: the path is a file, or a non-empty directory without an answers
            file and ``force`` is not given.
    """
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory", hint="choose another name")
    if not directory.is_dir() or force or answers_path(directory).is_file():
        return
    if any(directory.iterdir()):
        raise UsageError(
            f"{directory} is not empty and is not a project made by `fdl init` "
            f"(no {answers_path(directory).name})",
            hint="choose a new directory, or add fdl's files to this one with --force "
            "(files that exist stay as they are; nothing is deleted)",
        )


def read_existing(directory: Path, names: Sequence[str]) -> dict[str, str]:
    """The project's files among ``names`` that exist (name -> text)."""
    found = {}
    for name in names:
        path = directory / name
        if path.is_file() and not path.is_symlink():
            found[name] = path.read_text(encoding="utf-8", errors="replace")
    return found


def _decide(target: Path, spec: FileSpec, force: bool) -> tuple[str, str | None]:
    """What to do with one file: (action, reason when skipped)."""
    if target.is_symlink():
        return "skipped", "a symbolic link is in the way (fdl does not write through links)"
    if target.exists() and not target.is_file():
        return "skipped", "something that is not a file is in the way"
    for parent in target.parents:
        if parent.exists() and not parent.is_dir():
            return "skipped", f"{parent.name} is a file, not a directory"
    if not target.exists():
        return "created", None
    current = target.read_bytes()
    if current == spec.content.encode("utf-8"):
        return "unchanged", None
    if spec.kind != GENERATED:
        return "skipped", "differs from the template; yours is kept"
    if force:
        return "overwritten", None
    return "skipped", "differs from what fdl generates now; --force rewrites it"


def write_project(
    directory: Path, files: Sequence[FileSpec], *, force: bool = False, dry_run: bool = False
) -> WriteReport:
    """Write the planned ``files`` into ``directory`` (created when missing).

    Args:
        directory: The project directory.
        files: The planned files.
        force: Overwrite generated files that differ (user files never are).
        dry_run: Decide and report, write nothing.

    Returns:
        What happened (or would happen) to each file.
    """
    results = []
    for spec in files:
        target = directory / spec.path
        action, reason = _decide(target, spec, force)
        if action in ("created", "overwritten") and not dry_run:
            atomic_write_text(target, spec.content, mode=spec.mode)
        results.append(FileResult(spec.path, action, spec.kind, reason))
    return WriteReport(directory, tuple(results), dry_run=dry_run)
