"""``fdl init`` as one call: answers, plan, write."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.scaffold._answers import make_answers
from fdl.scaffold._plan import OVERLAY, READ_BY_IMAGES, plan_project
from fdl.scaffold._project_files import Answers, WriteReport
from fdl.scaffold._write import check_target, read_existing, write_project

__all__ = ["init_project"]


def init_project(
    directory: Path,
    given: Mapping[str, Any],
    recorded: Mapping[str, Any],
    *,
    force: bool = False,
    dry_run: bool = False,
) -> tuple[Answers, WriteReport]:
    """Create (or complete) the project in ``directory``.

    Args:
        directory: The project directory; its name is the project's.
        given: The answers given now (``template``, ``mode``, ``torch``, ``example``;
            None: not given).
        recorded: The answers of an earlier run (:func:`read_answers`).
        force: Write into a non-empty directory; overwrite the files fdl generates.
        dry_run: Decide everything, write nothing.

    Raises:
        UsageError: a name the template refuses, a non-empty directory without ``force``.
    """
    answers = make_answers(directory.name, dict(given), dict(recorded))
    check_target(directory, force=force)
    existing = read_existing(directory, [answers.manifest_file, OVERLAY, *READ_BY_IMAGES])
    files = plan_project(answers, existing=existing)
    return answers, write_project(directory, files, force=force, dry_run=dry_run)
