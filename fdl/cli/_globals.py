"""Global options: recognised only before the command name.

Everything after the command name belongs to the command, so ``fdl test -- -v``
passes ``-v`` to the test script (the reference strips it anywhere). ``--gpus`` and
``--no-prebuild`` are also taken after a project command's name, before ``--``, as floDl's
CLI takes them (:mod:`fdl.cli._project`).
"""

from __future__ import annotations

from fdl._text import did_you_mean
from fdl.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["GLOBAL_OPTIONS_HELP", "GlobalOptions", "parse_globals"]

GLOBAL_OPTIONS_HELP = [
    ("-e, --env NAME", "apply the overlay fdl.NAME.yml (also `@NAME`, or $FDL_ENV)"),
    ("-f, --manifest PATH", "use this manifest instead of the nearest fdl.yml"),
    ("-C, --directory DIR", "run as if fdl was started in DIR"),
    ("--set KEY=VALUE", "override a manifest value (repeatable; highest precedence)"),
    ("-v, --verbose", "more output (repeat for more); tracebacks for internal errors"),
    ("-q, --quiet", "only errors and results"),
    ("--no-color, --no-ansi", "no colours (also $NO_COLOR)"),
    ("--ansi", "colours even off a terminal (commands get FLODL_COLOR=always)"),
    (
        "--gpus SPEC",
        "a project command (and fdl probe) sees only these GPUs (`0,1`, `all`); also after its name",
    ),
    ("--no-prebuild", "floDl's; fdl never pre-builds a cluster command's binaries"),
    ("--no-append", "leave out a project command's `append:` (as after its name)"),
    ("-V, --version", "print the version and exit"),
    ("-h, --help", "show this help (`fdl <command> --help` for a command)"),
]

_VALUE_OPTIONS = {
    "-e": "env",
    "--env": "env",
    "-f": "manifest",
    "--manifest": "manifest",
    "-C": "directory",
    "--directory": "directory",
    "--set": "set",
    "--gpus": "gpus",
}
_FLAGS = [
    "--verbose",
    "--quiet",
    "--no-color",
    "--no-ansi",
    "--ansi",
    "--no-prebuild",
    "--no-append",
    "--version",
    "--help",
    "-v",
    "-q",
    "-V",
    "-h",
]


class GlobalOptions:
    """What the global options asked for."""

    def __init__(self) -> None:
        self.env: str | None = None
        self.env_from = ""
        self.manifest: Path | None = None
        self.directory: Path | None = None
        self.sets: list[str] = []
        self.verbosity = 1
        self.no_color = False
        self.ansi = False
        self.gpus: str | None = None
        self.no_prebuild = False
        self.no_append = False
        self.version = False
        self.help = False


def _set_env(options: GlobalOptions, value: str, source: str) -> None:
    if not value or value.startswith("-"):
        raise UsageError(f"{source} needs an environment name", hint="e.g. `fdl --env ci test`")
    if options.env is not None and options.env != value:
        raise UsageError(
            f"two environments selected: {options.env!r} ({options.env_from}) and {value!r} ({source})",
            hint="select one environment",
        )
    options.env = value
    options.env_from = source


def _assign(options: GlobalOptions, name: str, value: str, flag: str) -> None:
    if name == "env":
        _set_env(options, value, flag)
    elif name == "manifest":
        from pathlib import Path

        options.manifest = Path(value)
    elif name == "directory":
        from pathlib import Path

        options.directory = Path(value)
    elif name == "gpus":
        if not value or value.startswith("-"):
            raise UsageError(f"{flag} needs a value", hint="e.g. `fdl --gpus 0,1 train`")
        if options.gpus is not None:
            raise UsageError("--gpus is given twice", hint="give it once")
        from fdl.tasks import parse_gpus

        parse_gpus(value)  # checked here; the project command reads it
        options.gpus = value
    else:
        options.sets.append(value)


def parse_globals(argv: list[str]) -> tuple[GlobalOptions, list[str]]:
    """Split ``argv`` into global options and the command with its arguments.

    Raises:
        UsageError: an unknown option before the command, or a missing value.
    """
    options = GlobalOptions()
    index = 0
    while index < len(argv):
        token = argv[index]
        if token.startswith("@") and len(token) > 1:
            _set_env(options, token[1:], token)
            index += 1
            continue
        if token == "--":
            index += 1
            break
        if not token.startswith("-") or token == "-":
            break
        name, eq, inline = token.partition("=")
        if name in _VALUE_OPTIONS and token.startswith("--") and eq:
            _assign(options, _VALUE_OPTIONS[name], inline, name)
            index += 1
            continue
        if token in _VALUE_OPTIONS:
            if index + 1 >= len(argv):
                raise UsageError(f"{token} needs a value", hint=f"e.g. `fdl {token} VALUE ...`")
            _assign(options, _VALUE_OPTIONS[token], argv[index + 1], token)
            index += 2
            continue
        if len(token) > 2 and token[0] == "-" and token[1] != "-" and token[:2] in _VALUE_OPTIONS:
            _assign(options, _VALUE_OPTIONS[token[:2]], token[2:], token[:2])
            index += 1
            continue
        if token in ("-v", "--verbose"):
            options.verbosity += 1
        elif token.startswith("-v") and set(token[1:]) == {"v"}:
            options.verbosity += len(token) - 1
        elif token in ("-q", "--quiet"):
            options.verbosity = 0
        elif token in ("--no-color", "--no-ansi"):  # --no-ansi: floDl's name for it
            options.no_color = True
        elif token == "--ansi":  # floDl's: colours on, whatever the terminal
            options.ansi = True
        elif token == "--no-prebuild":  # floDl's: fdl never pre-builds (fdl.tasks._cluster)
            options.no_prebuild = True
        elif token == "--no-append":  # floDl's place for it: before the command
            options.no_append = True
        elif token in ("-V", "--version"):
            options.version = True
        elif token in ("-h", "--help"):
            options.help = True
        else:
            known = [*_VALUE_OPTIONS, *_FLAGS]
            close = did_you_mean(token, [k for k in known if k.startswith("--")])
            hint = (
                f"did you mean {close}?"
                if close
                else "global options go before the command; see `fdl --help`"
            )
            raise UsageError(f"unknown global option {token}", hint=hint)
        index += 1
    if options.ansi and options.no_color:
        raise UsageError("--ansi and --no-ansi (--no-color) are given together", hint="give one")
    return options, argv[index:]
