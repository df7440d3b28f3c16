"""``fdl completions SHELL``: the shell completion script."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from fdl.cli.commands._common import group

app = group(
    "completions",
    (
        "Print the completion script for bash, zsh or fish.\n\n"
        "The script asks fdl for candidates at completion time, so project commands, "
        "nested commands, presets and option choices are always those of the manifest "
        "(and environment) in effect.\n\n"
        "Example: echo 'eval \"$(fdl completions bash)\"' >> ~/.bashrc"
    ),
)


class Shell(str, Enum):
    """Supported shells."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completions(
    ctx: typer.Context,
    shell: Annotated[
        Shell, typer.Argument(help="bash, zsh or fish (default: bash, as floDl's).")
    ] = Shell.bash,
) -> None:
    """Print the completion script for SHELL.

    bash: eval "$(fdl completions bash)" in ~/.bashrc;
    zsh: eval "$(fdl completions zsh)" in ~/.zshrc (after compinit);
    fish: fdl completions fish > ~/.config/fish/completions/fdl.fish

    Example: eval "$(fdl completions bash)"
    """
    from fdl._assets import asset_dir

    script = (asset_dir("templates") / "completions" / f"fdl.{shell.value}").read_text(
        encoding="utf-8"
    )
    ctx.obj.console.out(script, end="")
