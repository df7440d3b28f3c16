"""``fdl diagnose``: do the GPUs, the toolchain and the active libtorch fit together?"""

from __future__ import annotations

from typing import Annotated

import typer

from fdl.cli import _setup_actions as actions
from fdl.cli.commands._common import JsonOption, group

app = group("diagnose")


@app.command()
def diagnose(
    ctx: typer.Context,
    as_json: JsonOption = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit with 1 when any check finds an error.")
    ] = False,
    no_docker: Annotated[bool, typer.Option("--no-docker", help="Do not probe docker.")] = False,
) -> None:
    """Check the machine, its GPUs, toolchain, docker and the active libtorch; each problem
    comes with its fix.

    Example: fdl diagnose --strict
    """
    raise typer.Exit(
        actions.diagnose(ctx.obj, as_json=as_json, strict=strict, docker=not no_docker)
    )
