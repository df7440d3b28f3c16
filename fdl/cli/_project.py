"""Running the project's own commands (``fdl <name>`` for names in fdl.yml)."""

from __future__ import annotations

from fdl._text import did_you_mean
from fdl.cli._registry import BUILTINS, FLODL_ONLY
from fdl.cli._session import Session
from fdl.errors import FdlError, UsageError

TYPE_CHECKING = False  # typing costs start-up; annotations only
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from fdl.manifest import Manifest
    from fdl.tasks import Invocation

__all__ = ["run_project_command"]


def run_project_command(session: Session, name: str, args: list[str]) -> int:
    """Run the manifest command ``name`` with ``args``; return its exit code.

    ``--help`` (before ``--``) shows what the command runs; ``--dry-run``
    prints the exact command line and environment instead of running it. ``--gpus`` and
    ``--no-prebuild`` before ``--`` are fdl's (floDl's global options), not the command's.

    Raises:
        UsageError: no such command (with a did-you-mean over built-ins and
            commands), or arguments the command does not take.
        ManifestError: the manifest or a nested manifest is invalid.
    """
    manifest = session.manifest_or_none()
    commands = (manifest.data.get("commands") or {}) if manifest is not None else {}
    if manifest is not None and session.nested_words:
        name, args = _from_nested_directory(session, manifest, name, args)
    if (manifest is None or name not in commands) and name in FLODL_ONLY:
        part, what, instead = FLODL_ONLY[name]
        renamed = _renamed(name, commands)  # fdl's template had a `start` of its own
        raise UsageError(
            f"`fdl {name}` is a command of floDl's CLI ({part}) that fdl does not have: it {what}",
            hint=f"{renamed}; for floDl's, use {instead}" if renamed else f"use {instead}",
        )
    if manifest is None or name not in commands:
        known = [*BUILTINS, *commands]
        close = did_you_mean(name, known)
        hint = f"did you mean `fdl {close}`?" if close else "run `fdl --help` to list the commands"
        renamed = _renamed(name, commands)
        if renamed:
            hint = renamed
        if manifest is not None and name in manifest.environments():
            # floDl's older docs select an overlay by a bare first word (`fdl cluster CMD`).
            rest = " ".join(args) or "<command>"
            hint = (
                f"`{name}` is an environment overlay (fdl.{name}.yml): select it with "
                f"`fdl @{name} {rest}` or `fdl --env {name} {rest}`"
            )
        where = f" in {manifest.path.name}" if manifest is not None else " (no fdl.yml found)"
        raise UsageError(f"unknown command {name!r}{where}", hint=hint)
    from fdl.tasks import prepare

    args, gpus = _contract_flags(session, args)
    environ = _with_verbosity(session)
    invocation = prepare(
        manifest,
        name,
        args,
        environ=environ,
        overlay=session.env,
        no_append=session.options.no_append,
        gpus=gpus,
    )
    if invocation.action == "refresh-schema":
        return _report_refresh(session, invocation)
    if invocation.action == "help":
        from fdl.cli._command_help import render_command_help

        session.console.out(render_command_help(invocation, session), end="")
        return 0
    plan = invocation.plan
    assert plan is not None
    if invocation.action == "dry-run":
        from fdl.tasks import render_script

        session.console.out(render_script(plan), end="")
        from fdl._recorded import keep_output

        keep_output(session.console, 0)  # when recorded: the next identical dry run writes it
        return 0
    from fdl.tasks import execute  # the runner: only a real run needs it

    if plan.docker is None:  # before the notes: a stop says it all
        from fdl.runner import default_runner
        from fdl.tasks import check_before_run

        check_before_run(plan, default_runner(), environ)
    for note in plan.notes:
        session.console.note(note)
    if plan.docker is not None and plan.docker.profile is not None:
        from fdl.tasks import ensure_service_image

        ensure_service_image(
            manifest,
            plan.docker,
            on_status=lambda text: session.console.info(f"fdl: {text}"),
            on_line=session.console.debug,
        )
    if plan.kind != "run":
        # Entries get flags the user did not type (settings, presets): say what runs.
        where = f"[{plan.docker.service}] " if plan.docker is not None else ""
        session.console.info(f"fdl: {where}{plan.script}")
    session.console.debug(f"fdl: running {' '.join(plan.argv)} (in {plan.cwd})")
    from fdl.tasks import keep_plan

    keep_plan(plan, environ, session.console)  # for the next identical run (when recorded)
    status = execute(plan, environ=environ)
    if plan.docker is not None and plan.docker.remembered and 0 < status < 128:
        # compose ran on answers kept from an earlier run without asking docker first: a
        # failure may be the engine's (stopped, removed, plugin gone); asking now says so
        from fdl.tasks import recheck_engine

        changed = recheck_engine(list(plan.docker.compose), environ)
        if changed:
            session.console.note(changed)
    if status != 0:
        from fdl.tasks import failure_note

        failed = failure_note(plan, status)
        if failed:
            session.console.note(failed)
    return status


def _from_nested_directory(
    session: Session, manifest: Manifest, name: str, args: list[str]
) -> tuple[str, list[str]]:
    """In a nested manifest's directory (``cd flodl-hf && fdl classify``, as floDl's docs
    say), a command of that manifest runs as ``fdl flodl-hf classify`` would: the manifest
    of the directory fdl runs in comes first, as with floDl's own CLI, then the project's."""
    from fdl.tasks import load_nested

    words = session.nested_words
    try:
        nested = load_nested(session.discovered_here, session.env, manifest.directory)
    except FdlError:
        return name, args  # the run through the words reports it
    if nested is None or name not in (nested.data.get("commands") or {}):
        return name, args
    if name in (manifest.data.get("commands") or {}):
        session.console.note(
            f"running `fdl {' '.join(words)} {name}` (the manifest of this directory); the "
            f"project's `{name}` is `fdl -C {manifest.directory} {name}`"
        )
    return words[0], [*words[1:], name, *args]


def _contract_flags(session: Session, args: list[str]) -> tuple[list[str], Any]:
    """``args`` without floDl's global ``--gpus SPEC`` and ``--no-prebuild``, which its CLI
    takes anywhere before ``--`` (main.rs:106-124), and the parsed ``--gpus``."""
    from fdl.tasks import parse_gpus, take_gpus

    cut = args.index("--") if "--" in args else len(args)
    args = [a for a in args[:cut] if a != "--no-prebuild"] + args[cut:]
    args, text = take_gpus(args)
    if text is not None and session.options.gpus is not None:
        raise UsageError("--gpus is given twice", hint="give it once")
    text = text if text is not None else session.options.gpus
    return args, None if text is None else parse_gpus(text)


# fdl's -q / -v / -vv / -vvv, as floDl's own CLI passes them to programs (0 .. 4).
_VERBOSITY_LEVELS = {0: "0", 2: "2", 3: "3", 4: "4"}


def _with_verbosity(session: Session) -> Mapping[str, str]:
    """The environment for the command: with ``-q``/``-v``, ``FDL_VERBOSITY`` and
    ``FLODL_VERBOSITY`` say how chatty it should be (they reach containers too); ``HOSTNAME``
    when unset; ``FLODL_COLOR`` after ``--ansi``/``--no-ansi``."""
    from fdl.tasks import hostname_change

    # HOSTNAME for compose's `hostname: ${HOSTNAME}` (bash does not export it), as floDl's
    # CLI fills it (main.rs:91-99): in the environment, not the plan (it is the machine's)
    environ = {**session.environ, **{c.name: c.value for c in hostname_change(session.environ)}}
    if session.options.ansi or session.options.no_color:  # as floDl's CLI (main.rs:40-57)
        environ["FLODL_COLOR"] = "always" if session.options.ansi else "never"
    level = _VERBOSITY_LEVELS.get(min(session.options.verbosity, 4))
    if level is None:
        return environ
    return {**environ, "FDL_VERBOSITY": level, "FLODL_VERBOSITY": level}


def _report_refresh(session: Session, invocation: Invocation) -> int:
    """``fdl <command> --refresh-schema``: what the entry said about itself."""
    from fdl.tasks import CommandSchema, cache_file

    nested = invocation.resolution.nested
    assert nested is not None
    schema = CommandSchema.from_data(nested.data.get("schema"))
    path = cache_file(nested)
    shown = path.relative_to(session.cwd) if path.is_relative_to(session.cwd) else path
    session.console.info(f"cached the schema of `fdl {invocation.resolution.name}` at {shown}")
    session.console.out(f"{len(schema.options)} options, {len(schema.args)} positional arguments")
    return 0


def _renamed(name: str, commands: dict[str, Any]) -> str | None:
    """The hint for a command an earlier template wrote under another name (cuda-build)."""
    from fdl.scaffold import renamed_command

    found = renamed_command(name)
    if found is None or found[1] not in commands:
        return None
    chosen, now = found
    return (
        f"the {chosen} template names it `{now}` now (`fdl init --update` renames it in "
        f"older projects): run `fdl {now}`"
    )
