"""``fdl init``: a new project that builds and trains, natively or in containers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.scaffold import Answers, WriteReport

app = group("init")


@app.command()
def init(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="The project directory to create; its name is the project's "
            "(. for this directory)."
        ),
    ],
    template: Annotated[
        str | None,
        typer.Option(
            "--template",
            "-t",
            help="flodl (floDl, Rust; the default), tch (tch-rs, Rust) or cpp (C++).",
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            "-m",
            help="mounted (libtorch mounted into the dev container; the default), baked "
            "(libtorch in the image) or native (no containers).",
        ),
    ] = None,
    native: Annotated[
        bool,
        typer.Option("--native", help="floDl's flag: the same as --mode native."),
    ] = False,
    docker: Annotated[
        bool,
        typer.Option(
            "--docker",
            help="floDl's flag (standalone Docker, libtorch baked in): the same as --mode baked.",
        ),
    ] = False,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch",
            help="PyTorch version of its libtorch (default: flodl, the one its floDl "
            "compiles against; cpp, the newest known).",
        ),
    ] = None,
    example: Annotated[
        bool | None,
        typer.Option(
            "--example/--no-example",
            help="Write the manifest as fdl.yml.example (committed) and keep fdl.yml local.",
        ),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            "--gpus",
            help="The GPUs the CUDA commands are for (6.1,12.0; none): picks the cuda "
            "service's libtorch as fdl setup would (default: this machine's GPUs).",
        ),
    ] = None,
    driver: Annotated[
        str | None,
        typer.Option("--driver", help="Their NVIDIA driver (default: this machine's)."),
    ] = None,
    with_hf: Annotated[
        bool | None,
        typer.Option(
            "--with-hf/--without-hf",
            help="flodl: add the HuggingFace playground (flodl-hf/, its own crate; "
            "`fdl flodl-hf classify`). Later: fdl add flodl-hf.",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Ask nothing: defaults for what is not given.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty directory and overwrite the files fdl generates "
            "(never your sources; nothing is deleted).",
        ),
    ] = False,
    update: Annotated[
        bool,
        typer.Option(
            "--update",
            help="Apply the current template to a project made by an older one: a "
            "three-way merge of each of your files (conflicts marked as git marks them); "
            "with --dry-run, the diff.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be written; write nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Create a project that builds and trains: sources, fdl.yml, CI overlay, images,
    compose file, CI workflow. Prompts only in a terminal; run again to add what is
    missing.

    Example: fdl init my-model --template cpp --mode native
    """
    from fdl.scaffold import DEFAULTS, init_project, read_answers, update_project, validate_name

    session: Session = ctx.obj
    mode = _reference_mode(mode, native=native, docker=docker)
    directory = (session.cwd / name).resolve()
    recorded = read_answers(directory) or {}
    # Before asking anything: a name the template refuses ends the run at once.
    # (--update keeps the name the project was made with, whatever its directory is called.)
    named = str(recorded.get("name") or directory.name) if update else directory.name
    validate_name(named, template or recorded.get("template") or DEFAULTS["template"])
    given = {
        "template": template,
        "mode": mode,
        "torch": torch,
        "example": example,
        "gpus": gpus,
        "driver": driver,
        "hf": with_hf,
    }
    if gpus is None and "gpus" not in recorded:
        # The GPUs of this machine (and its driver) decide the cuda service's libtorch,
        # recorded in the answers so that running init again gives the same project.
        from fdl.system import detect_gpus

        detected = detect_gpus()
        given["gpus"] = ",".join(str(c) for c in detected.capabilities) or "none"
        if driver is None:
            given["driver"] = detected.driver
    if update:
        if force:
            raise UsageError(
                "--update and --force exclude each other",
                hint="--update merges your files with the template; --force only rewrites "
                "the files fdl generates",
            )
        answers, report = update_project(directory, given, recorded or {}, dry_run=dry_run)
        if as_json:
            session.console.json({"answers": answers.to_json(), **report.to_json()})
        else:
            render_update(session, report)
        if any(r.action == "conflict" for r in report.results) and not dry_run:
            raise typer.Exit(1)
        return
    _ask(session, given, recorded, yes=yes, as_json=as_json)
    answers, report = init_project(directory, given, recorded, force=force, dry_run=dry_run)
    if as_json:
        session.console.json({"answers": answers.to_json(), **report.to_json()})
    else:
        _render(session, answers, report, force=force)


def _reference_mode(mode: str | None, *, native: bool, docker: bool) -> str | None:
    """floDl's ``--native``/``--docker`` (its CLI's only mode flags) as ``--mode``."""
    if native and docker:
        raise UsageError(
            "--native and --docker exclude each other",
            hint="keep one: --native (--mode native) or --docker (--mode baked)",
        )
    flag, chosen = ("--native", "native") if native else ("--docker", "baked")
    if not (native or docker):
        return mode
    if mode is not None and mode != chosen:
        raise UsageError(
            f"{flag} is --mode {chosen}, but --mode {mode} was given too",
            hint=f"keep one: --mode {mode} or {flag}",
        )
    return chosen


_MODE_HELP = {
    "mounted": "commands run in a dev container; libtorch mounted from this machine",
    "baked": "commands run in a dev container; libtorch baked into its image",
    "native": "commands run on this machine; no containers",
}
_VERB = {
    "created": "create",
    "overwritten": "overwrite",
    "unchanged": "keep",
    "skipped": "skip",
    "updated": "update",
    "merged": "merge",
    "conflict": "conflict in",
    "kept": "keep yours",
    "deleted": "delete",
}


def render_update(session: Session, report: WriteReport) -> None:
    """Each file's fate; in a dry run with the diff of what would change."""
    console = session.console
    prefix = "would " if report.dry_run else ""
    for result in report.results:
        if result.action == "unchanged":
            continue
        verb = _VERB[result.action] if report.dry_run else result.action
        line = f"  {prefix}{verb:<11} {result.path}"
        if result.reason:
            line += f"  ({result.reason})"
        console.out(line)
        if report.dry_run and result.diff:
            console.out(result.diff.rstrip("\n"))
    counts = ", ".join(f"{n} {action}" for action, n in report.counts().items() if n)
    where = "dry run: nothing written" if report.dry_run else "updated"
    console.out(f"{where} ({counts})")
    if report.paths("conflict") and not report.dry_run:
        console.info(
            "resolve the <<<<<<< markers in "
            + ", ".join(report.paths("conflict"))
            + ", then `fdl init . --force` writes the generated files from your manifest"
        )


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


def _yes_no(session: Session, question: str) -> bool:
    """A yes/no question on the terminal; Enter says no."""
    stream = session.console.stderr
    while True:
        stream.write(f"{question} [y/N]: ")
        stream.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer in ("", "n", "no"):
            return False
        if answer in ("y", "yes"):
            return True
        stream.write(f"  not an answer: {answer!r} (y or n)\n")


def _ask(
    session: Session,
    given: dict[str, Any],
    recorded: dict[str, Any],
    *,
    yes: bool,
    as_json: bool,
) -> None:
    """Fill in the template and mode not given (nor recorded), and for floDl whether to
    add the flodl-hf playground: asked in a terminal, else the defaults, said once."""
    from fdl.scaffold import DEFAULTS, MODES, TEMPLATES, template

    open_questions = [k for k in ("template", "mode") if given[k] is None and k not in recorded]
    asking = session.interactive and not yes and not as_json
    if asking:
        if "template" in open_questions:
            choices = [(name, template(name).description) for name in TEMPLATES]
            given["template"] = _choose(session, "Template:", choices)
        if "mode" in open_questions:
            given["mode"] = _choose(session, "Mode:", [(n, _MODE_HELP[n]) for n in MODES])
        chosen = given["template"] or recorded.get("template") or DEFAULTS["template"]
        if chosen == "flodl" and given["hf"] is None and "hf" not in recorded:
            given["hf"] = _yes_no(
                session,
                "Include flodl-hf (the HuggingFace playground: its own crate, "
                "`fdl flodl-hf classify`)?",
            )
        return
    if not open_questions:
        return
    if not as_json:
        used = ", ".join(f"--{key} {DEFAULTS[key]}" for key in open_questions)
        why = "--yes" if yes else "no terminal to ask"
        session.console.note(
            f"using the defaults {used} ({why}; pass them to choose)", once_key="init-defaults"
        )


def _shown(directory: Path, cwd: Path) -> str:
    try:
        relative = directory.relative_to(cwd)
    except ValueError:
        return str(directory)
    return "." if str(relative) == "." else str(relative)


def _say_fdl_install(session: Session) -> None:
    """The workflows install this fdl as it was installed: say when a runner cannot."""
    from fdl.ci import FIX, derived_install

    install = derived_install()
    if install.problem is not None:
        session.console.warn(
            f"the workflows cannot install fdl: {install.origin}; their `Install fdl` step "
            f"fails until you {FIX} (then run fdl ci generate, and edit ci.yml's step alike)"
        )


def _render(session: Session, answers: Answers, report: WriteReport, *, force: bool) -> None:
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
    if any(r.kind == "generated" for r in skipped) and not force:
        console.info("fdl init --force rewrites the skipped files fdl generates")
    if any(r.kind == "user" for r in skipped):
        console.info(
            "your versions of the skipped files are kept; to get the template's version of "
            "one, move yours away and run fdl init again"
        )
    _say_fdl_install(session)
    steps = next_steps(answers, directory=None if where == "." else where)
    width = max(len(command) for command, _ in steps)
    console.out("\nNext steps:")
    for command, comment in steps:
        console.out(f"  {command.ljust(width)}  # {comment}")
