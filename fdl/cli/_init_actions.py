"""``fdl init`` actions: gather the answers (prompting only in a terminal), plan,
write, and say what happened."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl.cli._session import Session

if TYPE_CHECKING:
    from fdl.scaffold import Answers, WriteReport

__all__ = ["InitOptions", "init"]

_MODE_HELP = {
    "mounted": "commands run in a dev container; libtorch mounted from this machine",
    "baked": "commands run in a dev container; libtorch baked into its image",
    "native": "commands run on this machine; no containers",
}
_VERB = {"created": "create", "overwritten": "overwrite", "unchanged": "keep", "skipped": "skip"}


@dataclass(frozen=True)
class InitOptions:
    """What ``fdl init`` was asked."""

    name: str
    template: str | None = None
    mode: str | None = None
    torch: str | None = None
    example: bool | None = None
    yes: bool = False
    force: bool = False
    dry_run: bool = False
    as_json: bool = False


def _choose(session: Session, question: str, choices: list[tuple[str, str]]) -> str:
    """Ask for one of ``choices`` (name, help) on the terminal; Enter takes the first."""
    stream = session.console.stderr
    stream.write(f"{question}\n")
    for index, (name, text) in enumerate(choices, 1):
        stream.write(f"  {index}) {name:<8} {text}\n")
    while True:
        stream.write(f"choice [1-{len(choices)}, Enter for {choices[0][0]}]: ")
        stream.flush()
        answer = sys.stdin.readline().strip().lower()
        if not answer:
            return choices[0][0]
        for index, (name, _) in enumerate(choices, 1):
            if answer in (str(index), name):
                return name
        stream.write(f"  not a choice: {answer!r}\n")


def _gather(session: Session, options: InitOptions, recorded: dict[str, Any]) -> dict[str, Any]:
    """The answers given on the command line, plus what the terminal was asked."""
    from fdl.scaffold import DEFAULTS, MODES, TEMPLATES, template

    given: dict[str, Any] = {
        "template": options.template,
        "mode": options.mode,
        "torch": options.torch,
        "example": options.example,
    }
    open_questions = [
        key for key in ("template", "mode") if given[key] is None and key not in recorded
    ]
    if not open_questions:
        return given
    if session.interactive and not options.yes and not options.as_json:
        if "template" in open_questions:
            choices = [(name, template(name).description) for name in TEMPLATES]
            given["template"] = _choose(session, "Template:", choices)
        if "mode" in open_questions:
            choices = [(name, _MODE_HELP[name]) for name in MODES]
            given["mode"] = _choose(session, "Mode:", choices)
        return given
    if not options.as_json:
        used = ", ".join(f"--{key} {DEFAULTS[key]}" for key in open_questions)
        why = "--yes" if options.yes else "no terminal to ask"
        session.console.note(f"using the defaults {used} ({why}; pass them to choose)")
    return given


def init(session: Session, options: InitOptions) -> int:
    """Create (or complete) a project; print what was written and the next steps."""
    from fdl.scaffold import (
        DEFAULTS,
        OVERLAY,
        READ_BY_IMAGES,
        check_target,
        make_answers,
        plan_project,
        read_answers,
        read_existing,
        validate_name,
        write_project,
    )

    directory = (session.cwd / options.name).resolve()
    recorded = read_answers(directory) or {}
    # Before asking anything: a name the template refuses ends the run at once.
    validate_name(
        directory.name, options.template or recorded.get("template") or DEFAULTS["template"]
    )
    answers = make_answers(directory.name, _gather(session, options, recorded), recorded)
    check_target(directory, force=options.force)
    existing = read_existing(directory, [answers.manifest_file, OVERLAY, *READ_BY_IMAGES])
    files = plan_project(answers, existing=existing)
    report = write_project(directory, files, force=options.force, dry_run=options.dry_run)
    if options.as_json:
        session.console.json({"answers": answers.to_json(), **report.to_json()})
    else:
        _render(session, options, answers, report)
    return 0


def _shown(directory: Path, cwd: Path) -> str:
    try:
        relative = directory.relative_to(cwd)
    except ValueError:
        return str(directory)
    return "." if str(relative) == "." else str(relative)


def _render(session: Session, options: InitOptions, answers: Answers, report: WriteReport) -> None:
    from fdl.scaffold import next_steps

    console = session.console
    where = _shown(report.directory, session.cwd)
    counts = report.counts()
    what = f"template {answers.template}, mode {answers.mode}, torch {answers.torch}"
    prefix = "would " if report.dry_run else ""
    for result in report.results:
        verb = _VERB[result.action] if report.dry_run else result.action
        line = f"  {prefix}{verb:<11} {result.path}"
        if result.reason:
            line += f"  ({result.reason})"
        console.out(line)
    summary = ", ".join(f"{count} {action}" for action, count in counts.items() if count)
    if report.dry_run:
        console.out(f"dry run: nothing written to {where} ({what})")
        return
    console.out(f"{answers.name if where == '.' else where}: {summary} ({what})")
    skipped = [r for r in report.results if r.action == "skipped" and r.reason]
    if any(r.kind == "generated" for r in skipped) and not options.force:
        console.info("fdl init --force rewrites the skipped files fdl generates")
    if any(r.kind == "user" for r in skipped):
        console.info(
            "your versions of the skipped files are kept; to get the template's version of "
            "one, move yours away and run fdl init again"
        )
    steps = next_steps(answers, directory=None if where == "." else where)
    width = max(len(command) for command, _ in steps)
    console.out("\nNext steps:")
    for command, comment in steps:
        console.out(f"  {command.ljust(width)}  # {comment}")
