"""``fdl setup``: the guided path for a new machine."""

from __future__ import annotations

from typing import Annotated

import typer

from fdl.cli import _setup_actions as actions
from fdl.cli.commands._common import JsonOption, group

app = group("setup")


@app.command()
def setup(
    ctx: typer.Context,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do it without asking (non-interactive).")
    ] = False,
    torch: Annotated[
        str | None,
        typer.Option("--torch", help="PyTorch version (default: libtorch.torch or the newest)."),
    ] = None,
    from_wheel: Annotated[
        bool,
        typer.Option("--from-wheel", help="Install from the PyPI wheel, not download.pytorch.org."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Plan afresh even if the active variant fits.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan; change nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Detect the GPUs, say which libtorch fits (official build, wheel, or source build),
    install and activate it.

    Example: fdl setup --yes
    """
    raise typer.Exit(
        actions.setup(
            ctx.obj,
            yes=yes,
            torch=torch,
            from_wheel=from_wheel,
            force=force,
            dry_run=dry_run,
            as_json=as_json,
        )
    )
