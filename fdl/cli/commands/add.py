"""``fdl add``: an optional part of the template, added to a project ``fdl init`` made."""

from __future__ import annotations

from typing import Annotated

import typer

from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group

app = group("add")


@app.command()
def add(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(help="What to add: flodl-hf (floDl's HuggingFace playground)."),
    ],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Show what would change (with the diff); write nothing."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Add a part of the template to this project: flodl-hf writes the HuggingFace
    playground (flodl-hf/, its own crate and fdl.yml) and a `flodl-hf` command in
    fdl.yml, as `fdl init --with-hf` would have; your fdl.yml is merged three ways
    as by `fdl init --update` (conflicts marked, exit 1).

    Example: fdl add flodl-hf --dry-run
    """
    from fdl.cli.commands.init import render_update
    from fdl.scaffold import add_to_project, read_answers

    session: Session = ctx.obj
    directory = session.cwd.resolve()
    recorded = read_answers(directory) or {}
    answers, report = add_to_project(directory, target, recorded, dry_run=dry_run)
    if as_json:
        session.console.json({"answers": answers.to_json(), **report.to_json()})
    else:
        render_update(session, report)
    if report.paths("conflict") and not dry_run:
        raise typer.Exit(1)
