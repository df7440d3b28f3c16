"""What every built-in command group shares: how its typer app is made, common options."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["JsonOption", "group"]

JsonOption = Annotated[bool, typer.Option("--json", help="Output JSON.")]


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
