"""The built-in command groups: name -> module and one-line summary.

Each module ``fdl.cli.commands.<name>`` exports a typer ``app``; it is imported
only when its group runs, so ``fdl --help`` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUILTINS", "Builtin"]


@dataclass(frozen=True)
class Builtin:
    """A built-in command group."""

    name: str
    summary: str
    module: str


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin("config", "show, explain, validate the merged manifest", "fdl.cli.commands.config"),
        Builtin(
            "run",
            "run a project command by name (also one a built-in shadows)",
            "fdl.cli.commands.run",
        ),
        Builtin(
            "completions",
            "print the shell completion script (bash, zsh, fish)",
            "fdl.cli.commands.completions",
        ),
    )
}
