"""``fdl autocomplete [SHELL]``: floDl's spelling for installing ``fdl completions``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli.commands._common import group
from fdl.errors import EnvironmentProblem, UsageError

app = group("autocomplete")


@app.command()
def autocomplete(
    ctx: typer.Context,
    shell: Annotated[
        str | None, typer.Argument(help="bash, zsh or fish (default: from $SHELL, else bash).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the file's new text; write nothing.")
    ] = False,
) -> None:
    """Install completions into the shell's start-up file (floDl's `fdl autocomplete`).

    Adds one block that evaluates `fdl completions SHELL` to ~/.bashrc, ~/.zshrc or
    ~/.config/fish/config.fish, replacing the block an earlier run (of fdl or of floDl's
    CLI) left there. --dry-run prints the file's new text instead.

    Example: fdl autocomplete zsh
    """
    from fdl._files import atomic_write_text, existing_mode, read_small_text, reason_of
    from fdl.cli._rc_block import SHELLS, detect_shell, rc_file, with_block

    session = ctx.obj
    environ = session.environ
    chosen = shell or detect_shell(environ)
    if chosen not in SHELLS:
        raise UsageError(f"unknown shell {chosen!r}", hint="use bash, zsh or fish")
    home = environ.get("HOME")
    if not home:
        raise EnvironmentProblem(
            "HOME is not set, so there is no start-up file to write",
            hint=f'set HOME, or add eval "$(fdl completions {chosen})" to your shell\'s rc file',
        )
    path = rc_file(chosen, Path(home))
    target = path.resolve()  # a dotfile manager's link keeps pointing at the new text
    try:
        text = with_block(read_small_text(target) or "", chosen)
        if dry_run:
            session.console.out(text, end="")
            return
        atomic_write_text(target, text, mode=existing_mode(target))
    except OSError as exc:
        raise EnvironmentProblem(
            f"{path}: {reason_of(exc)}",
            hint=f'add eval "$(fdl completions {chosen})" to it by hand',
        ) from None
    session.console.info(f"completions for {chosen} installed in {path}")
    session.console.info(f"reload with: source {path}")
