"""``fdl version``: the version of fdl (as ``fdl --version``; floDl's CLI has both)."""

from __future__ import annotations

import typer

from fdl.cli.commands._common import JsonOption, group

app = group("version", "Print the version of fdl.\n\nExample: fdl version")


@app.command()
def version(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Print the version of fdl (the same as `fdl --version`).

    Example: fdl version --json
    """
    from fdl import __version__

    if as_json:
        ctx.obj.console.json({"version": __version__})
        return
    ctx.obj.console.out(f"fdl {__version__}")
