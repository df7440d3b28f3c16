"""``fdl init``: scaffold projects that build and train, natively or in containers.

Plan, then write::

    from fdl.scaffold import make_answers, plan_project, write_project

    answers = make_answers("my-model", {"template": "cpp", "mode": "native"}, {})
    files = plan_project(answers)                     # pure: sorted FileSpec values
    report = write_project(Path("my-model"), files)   # created/unchanged/skipped/...

Templates live in the shipped ``templates/scaffold/``; the Dockerfiles and the
compose file come from :mod:`fdl.images`, planned from the generated manifest.
"""

from __future__ import annotations

from fdl.scaffold._answers import (
    DEFAULTS,
    answers_path,
    make_answers,
    read_answers,
    suggest_name,
    validate_name,
)
from fdl.scaffold._docs import next_steps
from fdl.scaffold._init import ADDABLE, BASE_DIR, add_to_project, init_project, update_project
from fdl.scaffold._plan import OVERLAY, READ_BY_IMAGES, plan_project
from fdl.scaffold._project_files import (
    ACTIONS,
    GENERATED,
    MODES,
    USER,
    Answers,
    FileResult,
    FileSpec,
    WriteReport,
)
from fdl.scaffold._templates import TEMPLATES, renamed_command, template
from fdl.scaffold._write import check_target, read_existing, write_project

__all__ = [
    "ACTIONS",
    "ADDABLE",
    "BASE_DIR",
    "DEFAULTS",
    "GENERATED",
    "MODES",
    "OVERLAY",
    "READ_BY_IMAGES",
    "TEMPLATES",
    "USER",
    "Answers",
    "FileResult",
    "FileSpec",
    "WriteReport",
    "add_to_project",
    "answers_path",
    "check_target",
    "init_project",
    "make_answers",
    "next_steps",
    "plan_project",
    "read_answers",
    "read_existing",
    "renamed_command",
    "suggest_name",
    "template",
    "update_project",
    "validate_name",
    "write_project",
]
