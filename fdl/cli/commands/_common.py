"""What every built-in command group shares: how its typer app is made, common options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from fdl.cli._session import Session

__all__ = [
    "DryRunOption",
    "JsonOption",
    "OverwriteOption",
    "ShowPlanOption",
    "TorchOption",
    "YesOption",
    "checked_output",
    "confirm_delete",
    "group",
]

JsonOption = Annotated[bool, typer.Option("--json", help="Output JSON.")]
# The two options of a command that deletes (`fdl cache clean`, `fdl libtorch remove`).
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Delete without asking (needed without a terminal).")
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
]
# --dry-run of a command that plans and then carries its plan out (fdl setup, fdl nccl build).
ShowPlanOption = Annotated[bool, typer.Option("--dry-run", help="Show the plan; change nothing.")]
# --force of a command that writes generated files (fdl ci generate, fdl image render -o DIR).
OverwriteOption = Annotated[
    bool,
    typer.Option("--force", help="Overwrite files at generated paths that fdl did not write."),
]
# --torch of the commands that install a libtorch (fdl setup, fdl libtorch download and
# install): the release, as LibtorchSettings.torch_for resolves it.
TorchOption = Annotated[
    str | None,
    typer.Option(
        "--torch",
        help="PyTorch version (2.14 or 2.14.1; default: libtorch.torch, else the framework's, "
        "else the newest).",
    ),
]


def group(name: str, help: str | None = None, *, no_args_is_help: bool = False) -> typer.Typer:
    """A typer app for a built-in group, set up the way fdl runs them.

    No rich help (it costs ~100 ms of start-up), no typer completion (fdl has its
    own, ``fdl completions``), and no pretty tracebacks: fdl's own reporter turns
    errors into messages and exit codes.
    """
    return typer.Typer(
        name=name,
        help=help,
        no_args_is_help=no_args_is_help,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )


def checked_output(path: Path, option: str = "-o", *, directory: bool = False) -> Path:
    """``path`` when fdl may write its output there (a regular or new file, or with
    ``directory`` a directory); a FIFO, a device, ``/proc``... end in a usage error
    instead of a hang or an internal error.

    Raises:
        UsageError: naming the path, what it is, and the fix.
    """
    from fdl._files import output_refusal
    from fdl.errors import UsageError

    problem = output_refusal(path, directory=directory)
    if problem is not None:
        what = "a directory" if directory else "a file"
        raise UsageError(problem, hint=f"give {option} {what} under your project or home")
    return path


def confirm_delete(
    session: Session, what: str, command: str, args: list[str], *, yes: bool
) -> bool:
    """Whether ``command`` (``fdl cache clean``, given ``args``) may delete ``what``: with
    ``--yes``, or when the user says so; says "nothing deleted" when not.

    Raises:
        UsageError: no terminal to ask and no ``--yes`` (the fix: the command with ``--yes``).
    """
    if yes:
        return True
    if not session.interactive:
        from fdl.errors import UsageError

        raise UsageError(
            f"{command} deletes {what}; there is no terminal to ask",
            hint=f"confirm with: {' '.join([command, *args])} --yes",
        )
    if session.confirm(f"delete {what}?"):
        return True
    session.console.info("nothing deleted")
    return False


def visible_devices(gpus: str | None) -> tuple[int, ...] | None:
    """The device indices floDl's global ``--gpus SPEC`` leaves (``fdl --gpus 1 probe``),
    both vendors alike; None for every GPU (no ``--gpus``, or ``all``)."""
    if gpus is None:
        return None
    from fdl.tasks import parse_gpus

    spec = parse_gpus(gpus)
    return None if isinstance(spec, str) else spec
