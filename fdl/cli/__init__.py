"""The ``fdl`` command line: the entry path.

``main`` parses the global options (only before the command name) and answers the
commands that must start fast itself (``--version``, ``--help``, ``config show`` and
``config explain``, ``libtorch list|info``, shell completion) without importing typer.
A built-in group's module (:data:`fdl.cli._registry.BUILTINS`) is imported only when it
is named and runs as a typer app with the session as click's context object; any other
name is a command of the project's manifest. This is also the one place where errors become messages and
exit codes.
"""

from __future__ import annotations

import os
import sys

from fdl import __version__
from fdl.cli._console import Console, from_environment
from fdl.cli._globals import GlobalOptions, parse_globals
from fdl.cli._registry import BUILTINS
from fdl.errors import ExitCode, FdlError, Interrupted, ManifestErrors, Terminated

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType
    from typing import Any, TypeVar

    _T = TypeVar("_T")

    from fdl.cli._session import Session

__all__ = ["error_json", "main", "report", "try_fast_path"]

# The hidden command the shell completion scripts call (see fdl.cli._complete).
COMPLETE = "__complete"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fdl`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    from fdl._group import stop_all

    if argv is not None:
        try:
            return _main(list(argv), own_process=False)
        finally:
            stop_all()  # a child a signal caught between its start and its caller's try
    # fdl's own process (the console script, `python -m fdl`): the short answers
    # (`version`, `--help`, `config show|explain`, completion) run without the cyclic
    # garbage collector, whose passes over the freshly imported modules found nothing to
    # free (fdl's trees hold no cycles) but cost about 2 ms; commands that run longer turn
    # it back on. At exit, the objects are frozen: the interpreter's last full
    # collection would otherwise walk them all for nothing (about 4 ms). A caller running
    # main() in its own process (the tests) keeps its collector as it was.
    import gc

    gc.disable()
    try:
        return _main(sys.argv[1:], own_process=True)
    finally:
        stop_all()
        gc.freeze()


def _main(args: list[str], *, own_process: bool) -> int:
    console = Console()
    rest: list[str] = []
    try:
        options, rest = parse_globals(args)
        console = from_environment(options.verbosity, options.no_color, ansi=options.ansi)
        if options.version or (not options.help and rest in (["version"], ["version", "--json"])):
            # A version is instant: neither typer nor the manifest is loaded for it.
            if rest[1:] == ["--json"]:
                console.json({"version": __version__})
            else:
                console.out(f"fdl {__version__}")
            return 0
        fast = try_fast_path(options, rest, console, args if own_process else None)
        if fast is None and rest[:1] == ["libtorch"]:  # `libtorch list|info`, as fast
            from fdl.cli import _variant_view

            fast = _variant_view.try_fast_path(options, rest, console)
        if fast is not None:
            return fast
        # `fdl [OPTIONS] <command> ARGS` as run before, unchanged since: its kept plan runs
        # (or its dry run is written) without the planner (fdl.tasks._replay); else this
        # run's planning is recorded for the next
        replayable = own_process and _replayable(rest)
        if replayable:
            from fdl._recorded import record
            from fdl.tasks import replay_plan

            replayed = _with_signals(lambda: replay_plan(args, console))
            if replayed is not None:
                return replayed
            record(args, console)
        try:
            return _planned(options, console, rest, own_process=own_process)
        finally:
            if replayable:
                from fdl._recorded import stop

                stop(console)
    except (FdlError, Interrupted) as error:
        if _wants_json(rest):
            console.json({"error": error_json(error)})
        return report(console, error)
    except KeyboardInterrupt:
        console.line("")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # stdout closed early (`fdl config show | head`): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        from fdl.errors import environment_problem

        problem = environment_problem(exc)
        return report(console, problem) if problem is not None else report_bug(console, exc)
    except Exception as exc:
        return report_bug(console, exc)


def _replayable(rest: list[str]) -> bool:
    """A project command (the first word after the global options): one whose kept plan
    may answer it."""
    word = rest[0] if rest else ""
    return bool(word) and word not in BUILTINS and word != COMPLETE and word[0] not in "-@"


def _with_signals(run: Callable[[], _T]) -> _T:
    """``run()`` with SIGINT/SIGTERM as exceptions, so what fdl started (a schema probe
    before a project command, a build) is ended on the way out; while a project command
    runs in the foreground, its signals are forwarded to it instead (fdl._foreground).
    Restored after: a caller running fdl in its own process (the tests) keeps its own."""
    import signal

    previous = (
        signal.signal(signal.SIGINT, _interrupt),
        signal.signal(signal.SIGTERM, _terminate),
    )
    try:
        return run()
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


def _planned(
    options: GlobalOptions, console: Console, rest: list[str], *, own_process: bool
) -> int:
    """Any command but the short answers: the session, then help, completion, a built-in
    or the project's command."""
    from fdl.cli._session import install

    session = install(options, console)
    if rest and rest[0] != COMPLETE:
        from fdl.cli._first_word import apply_first_word

        rest[:] = apply_first_word(session, list(rest))  # the caller's too (_wants_json)
        options.help = options.help or rest in (["--help"], ["-h"])
    if options.help or not rest:
        from fdl.cli._help import render_top_help

        console.out(render_top_help(session), end="")
        return 0
    if rest[0] == COMPLETE:
        from fdl.cli._complete import complete

        return complete(session, rest[1:])
    name, tail = rest[0], rest[1:]
    if own_process:
        import gc

        gc.enable()  # a command that may run long collects its cycles (see main)
    return _with_signals(lambda: _run_learning(session, name, tail))


# --- the fast path: `config show` and `config explain` without typer ---------------------
# Scripts and editors call them often; typer and its parser cost more to import than the
# rest of the command. This recognises their plain forms and calls the same action the
# typer command calls; anything else (`--help`, unknown options, `--`) goes through typer,
# which reports it properly. tests/cli/test_fastpath.py checks both paths agree.

# sub-command -> (its flags -> the action's keyword, whether it takes a KEY argument)
_FAST: dict[str, tuple[dict[str, str], bool]] = {
    "show": (
        {"--json": "as_json", "--no-origin": "no_origin", "--show-secrets": "show_secrets"},
        False,
    ),
    "explain": ({"--json": "as_json", "--show-secrets": "show_secrets"}, True),
}


def try_fast_path(
    options: GlobalOptions,
    rest: list[str],
    console: Console,
    own_args: list[str] | None = None,
) -> int | None:
    """Run ``config show`` or ``config explain`` directly when their arguments are
    simple; else None. In fdl's own process (``own_args``: its whole command line), the
    answer of an identical earlier run is given again when nothing it read has changed
    (fdl._recorded), and this one is kept for the next."""
    if options.help or len(rest) < 2 or rest[0] != "config" or rest[1] not in _FAST:
        return None
    names, takes_key = _FAST[rest[1]]
    flags = dict.fromkeys(names.values(), False)
    env: str | None = None
    key: str | None = None
    args = rest[2:]
    index = 0
    while index < len(args):
        token = args[index]
        if token in names:
            flags[names[token]] = True
        elif (
            token in ("--env", "-e")
            and index + 1 < len(args)
            and not args[index + 1].startswith("-")
        ):
            env = args[index + 1]
            index += 1
        elif token.startswith("--env=") and len(token) > len("--env="):
            env = token.split("=", 1)[1]
        elif takes_key and key is None and token and not token.startswith("-"):
            key = token
        else:
            return None
        index += 1
    if flags["show_secrets"]:
        own_args = None  # what it shows is never written to the cache
    if own_args is not None:
        from fdl._recorded import record, replay_output

        answered = replay_output(own_args, console)
        if answered is not None:
            return answered
        record(own_args, console)
    try:
        code = _config_answer(options, console, rest[1], key, env, flags)
    finally:
        if own_args is not None:
            from fdl._recorded import stop

            stop(console)
    return code


def _config_answer(
    options: GlobalOptions,
    console: Console,
    what: str,
    key: str | None,
    env: str | None,
    flags: dict[str, bool],
) -> int:
    from fdl.cli import _config_actions
    from fdl.cli._session import install

    session = install(options, console)
    if what == "explain":
        code = _config_actions.explain(
            session, key, env=env, as_json=flags["as_json"], show_secrets=flags["show_secrets"]
        )
    else:
        code = _config_actions.show(
            session,
            env=env,
            as_json=flags["as_json"],
            origins=not flags["no_origin"],
            show_secrets=flags["show_secrets"],
        )
    from fdl._recorded import keep_output

    keep_output(console, code)  # when recorded
    return code


# --- errors: the one place where they become messages and exit codes ------------------------

MAX_LISTED = 20


def _one(console: Console, error: FdlError | Interrupted) -> None:
    console.error(str(error))
    if error.details:
        for line in error.details.strip("\n").splitlines():
            if line.strip():  # tool output tails often carry runs of empty lines
                console.line(f"  {line}")
    if error.verbose_details and console.verbosity >= 2:
        for line in error.verbose_details.strip("\n").splitlines():
            if line.strip():
                console.line(f"  | {line}")
    if error.hint:
        console.line(f"  {console.style('fix:', 'green')} {error.hint}")
    if error.verbose_details and console.verbosity < 2:
        console.line("  (run again with -v for the tool's own output)")


def report(console: Console, error: FdlError | Interrupted) -> int:
    """Print ``error`` (what, where, how to fix) and return its exit code."""
    if isinstance(error, ManifestErrors):
        for item in error.errors[:MAX_LISTED]:
            _one(console, item)
        hidden = len(error.errors) - MAX_LISTED
        if hidden > 0:
            console.line(f"... and {hidden} more")
        console.line(f"{len(error.errors)} problems in the manifest")
        return int(error.exit_code)
    _one(console, error)
    return int(error.exit_code)


def report_bug(console: Console, exc: BaseException) -> int:
    """An unexpected exception: a short message, the trace with -v."""
    import traceback

    console.error(f"internal error: {type(exc).__name__}: {exc}")
    if console.verbosity >= 2:
        console.line("".join(traceback.format_exception(exc)).rstrip())
    else:
        console.line("  this is a bug in fdl; run again with -v to see the traceback and report it")
    return int(ExitCode.BUG)


def _wants_json(rest: list[str]) -> bool:
    """A built-in command asked for ``--json``: its failure is JSON on stdout too."""
    if not rest or rest[0] not in BUILTINS or rest[0] == "run":
        return False
    own = rest[1 : rest.index("--")] if "--" in rest else rest[1:]
    return "--json" in own


def error_json(error: FdlError | Interrupted) -> dict[str, object]:
    """An error as data: what scripts reading ``--json`` get when the command is refused."""
    if isinstance(error, ManifestErrors):
        return {
            "message": f"{len(error.errors)} problems in the manifest",
            "exit_code": int(error.exit_code),
            "problems": [error_json(item) for item in error.errors],
        }
    location = error.location
    return {
        "message": error.message,
        "hint": error.hint,
        "location": None
        if location is None
        else {"file": location.file, "line": location.line, "column": location.column},
        "details": error.details,
        "exit_code": int(error.exit_code),
        "kind": type(error).__name__,
    }


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Interrupted rather than KeyboardInterrupt: click would turn the latter into
    # "Aborted!" with exit status 1. Never an FdlError (fdl.errors.Interrupted). Held
    # while a child is being started (fdl._group.start), raised once it is stopped.
    from fdl._group import hold_or_raise

    hold_or_raise(Interrupted())


def _terminate(signum: int, frame: FrameType | None) -> None:
    # Unwinds like Ctrl-C (locks released, staging removed), then exits 143.
    from fdl._group import hold_or_raise

    hold_or_raise(Terminated())


def _project_command_wins(session: Session, name: str, tail: list[str]) -> bool:
    """A project command named like a built-in group (floDl's own `bench`) runs when the
    words after it are not one of the group's sub-commands: `fdl bench` is the project's,
    `fdl bench run` the built-in's. Commands without sub-commands always win as built-ins
    (the project's one is `fdl run NAME`)."""
    from importlib import import_module

    if BUILTINS[name].single:
        return False
    try:
        manifest = session.manifest_or_none()
    except FdlError:
        return False  # a broken manifest must not take the built-ins with it
    if manifest is None or name not in (manifest.data.get("commands") or {}):
        return False
    app = getattr(import_module(BUILTINS[name].module), "app", None)
    import typer

    if not isinstance(app, typer.Typer):
        return False
    subcommands = getattr(typer.main.get_command(app), "commands", None)
    if not subcommands:
        return False
    first = tail[0] if tail else None
    if first is not None and first in subcommands:
        return False
    session.console.note(
        f"running the project's `{name}`; the built-in is `fdl {name} {'|'.join(subcommands)}`"
    )
    return True


def _placeholders(command: object) -> None:
    """One placeholder style in every built-in's help, as the README writes them: a value
    option or an argument without its own metavar shows its name in capitals (`--torch
    TORCH`, `NAME`), not click's type names (`<str>`, `<path>`, `<name>`); sub-command
    lists show whole first paragraphs."""
    for param in getattr(command, "params", ()):
        if getattr(param, "metavar", "") is not None or getattr(param, "is_flag", False):
            continue
        if getattr(param, "count", False) or getattr(param, "name", None) is None:
            continue
        choices = getattr(getattr(param, "type", None), "choices", None)
        if choices:
            continue  # click shows the choices themselves
        param.metavar = str(param.name).upper()
        if getattr(param, "param_type_name", "") == "argument":
            _plain_usage(param)
    for child in (getattr(command, "commands", None) or {}).values():
        _placeholders(child)
        # a group's list of sub-commands shows each one's first paragraph whole (the
        # formatter wraps it), never click's 45-character cut mid-phrase
        help_text = getattr(child, "help", None)
        if help_text and not getattr(child, "short_help", None):
            child.short_help = " ".join(help_text.split("\n\n", 1)[0].split())


def _plain_usage(argument: Any) -> None:
    """The usage line shows ``NAME`` (required) or ``[NAME]``, as the README does, not
    typer's ``{NAME}``."""
    label = str(argument.metavar) + ("..." if argument.nargs == -1 else "")
    text = label if argument.required else f"[{label}]"

    def make_metavar(ctx: object = None, *, usage: bool = False) -> str:
        return text if usage else str(argument.metavar)

    argument.make_metavar = make_metavar


def _run_learning(session: Session, name: str, tail: list[str]) -> int:
    """The command; one that names a torch release newer than the tables reads it from
    PyPI and runs again (:mod:`fdl.cli._learn`)."""
    from fdl.cli._learn import pypi_url, with_learning

    def run() -> int:
        if name in BUILTINS and not _project_command_wins(session, name, tail):
            return _run_builtin(name, tail, session)
        from fdl.cli._project import run_project_command

        return run_project_command(session, name, tail)

    return with_learning(
        run, session.console, pypi=pypi_url(session.environ), dry_run="--dry-run" in tail
    )


def _run_builtin(name: str, tail: list[str], session: Session) -> int:
    """Run a built-in group's typer app with the session as click's context object.

    Click's own usage errors (an unknown sub-command or option) come out in fdl's
    what/where/fix form with exit 2, like every other error.
    """
    from importlib import import_module

    import typer

    module = import_module(BUILTINS[name].module)
    normalize = getattr(module, "normalize", None)
    if normalize is not None:
        tail = normalize(tail)
    if not isinstance(module.app, typer.Typer):  # `fdl run` takes its arguments unparsed
        return int(module.app(args=tail, prog_name=f"fdl {name}", obj=session) or 0)
    command = typer.main.get_command(module.app)
    _placeholders(command)
    try:
        result = command.main(
            args=tail, prog_name=f"fdl {name}", standalone_mode=False, obj=session
        )
    except Exception as exc:
        kind = type(exc).__name__
        if kind == "Abort":  # click's Ctrl-C at a prompt
            return int(ExitCode.INTERRUPTED)
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        if kind == "NoArgsIsHelpError":  # `fdl config`: the group's help, as floDl's CLI
            session.console.out(exc.format_message().rstrip("\n"))  # (documented) gives it
            return 0
        raise _usage_error(exc, f"fdl {name}") from None
    except SystemExit as exit_:
        code = exit_.code
        return 0 if code is None else code if isinstance(code, int) else 1
    return int(result or 0)


def _usage_error(exc: Exception, fallback: str) -> FdlError:
    """A click usage error as fdl's: the command it is about, what, and the fix."""
    import re

    from fdl.errors import UsageError

    context = getattr(exc, "ctx", None)
    where = getattr(context, "command_path", None) or fallback
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    found = re.match(r"(?s)(.*?)\.?\s*Did you mean (.+?)\?$", message.strip())
    if found is not None:
        what, suggestion = found.group(1), found.group(2).replace("'", "")
        first = suggestion.split(",")[0].strip()
        fix = (
            f"did you mean {first}?"
            if first.startswith("-")
            else f"did you mean `{where} {first}`?"
        )
        return UsageError(f"{where}: {what[:1].lower()}{what[1:]}", hint=fix)
    message = message.strip().rstrip(".")
    possible = re.match(r"(?s)(.*?)\s*\(Possible options: (.+)\)$", message)
    if possible is not None:
        from fdl._text import did_you_mean

        message, options = possible.group(1), [o.strip() for o in possible.group(2).split(",")]
        typed = message.rsplit(" ", 1)[-1]
        close = did_you_mean(typed, options) or options[0]
        return UsageError(
            f"{where}: {message[:1].lower()}{message[1:]}", hint=f"did you mean {close}?"
        )
    return UsageError(f"{where}: {message[:1].lower()}{message[1:]}", hint=f"see `{where} --help`")
