"""``fdl init``: a new project that builds and trains, natively or in containers."""

from __future__ import annotations

from typing import Annotated

import typer

from fdl.cli import _init_actions as actions
from fdl.cli.commands._common import JsonOption, group

app = group("init")


@app.command()
def init(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="The project directory to create; its name is the project's "
            "(. for this directory)."
        ),
    ],
    template: Annotated[
        str | None,
        typer.Option("--template", "-t", help="flodl (floDl, Rust; the default) or cpp (C++)."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            "-m",
            help="mounted (libtorch mounted into the dev container; the default), baked "
            "(libtorch in the image) or native (no containers).",
        ),
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch", help="PyTorch version of its libtorch (default: the newest known)."
        ),
    ] = None,
    example: Annotated[
        bool | None,
        typer.Option(
            "--example/--no-example",
            help="Write the manifest as fdl.yml.example (committed) and keep fdl.yml local.",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Ask nothing: defaults for what is not given.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty directory and overwrite the files fdl generates "
            "(never your sources; nothing is deleted).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be written; write nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Create a project that builds and trains: sources, fdl.yml, CI overlay, images,
    compose file, CI workflow. Prompts only in a terminal; run again to add what is
    missing.

    Example: fdl init my-model --template cpp --mode native
    """
    options = actions.InitOptions(
        name=name,
        template=template,
        mode=mode,
        torch=torch,
        example=example,
        yes=yes,
        force=force,
        dry_run=dry_run,
        as_json=as_json,
    )
    raise typer.Exit(actions.init(ctx.obj, options))
