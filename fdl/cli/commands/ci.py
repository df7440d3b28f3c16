"""``fdl ci``: the image matrix (profiles x libtorch variants) as generated CI files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli import _ci_actions as actions
from fdl.cli.commands._common import JsonOption, group

app = group(
    "ci",
    "The image matrix of the manifest's ci: section: a bake file and a GitHub "
    "Actions workflow, kept current by a drift check.\n\nExample: fdl ci generate",
    no_args_is_help=True,
)

OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Use this directory instead of the repository root (same layout below it).",
    ),
]


@app.command()
def matrix(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the resolved build matrix: each variant and how CI installs it, each cell
    (profile x variant) with its tag, build arguments, dependencies, cache and test.

    Example: fdl ci matrix --json
    """
    raise typer.Exit(actions.matrix(ctx.obj, as_json=as_json))


@app.command()
def generate(
    ctx: typer.Context,
    output: OutputOption = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Overwrite files at generated paths that fdl did not write."),
    ] = False,
) -> None:
    """Write docker-bake.hcl, a Dockerfile per cell and per libtorch image, and the
    GitHub Actions workflow (only files that changed; stale generated Dockerfiles are
    removed; a file of yours at a generated path is refused unless --force).

    Example: fdl ci generate
    """
    raise typer.Exit(actions.generate(ctx.obj, output, force=force))


@app.command()
def check(ctx: typer.Context, output: OutputOption = None) -> None:
    """Exit 1, with a diff, when the generated files differ from what the manifest
    makes now (a missing, changed or stale file). Run it in CI.

    Example: fdl ci check
    """
    raise typer.Exit(actions.check(ctx.obj, output))
