"""``fdl image``: Dockerfiles from the manifest's ``images:`` profiles, builds, sizes, runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli import _image_actions as actions
from fdl.cli.commands._common import JsonOption, group

app = group(
    "image",
    "Generated Dockerfiles, BuildKit builds, image sizes and runs.\n\n"
    "Example: fdl image build train",
    no_args_is_help=True,
)


@app.command()
def render(
    ctx: typer.Context,
    profile: Annotated[
        str | None, typer.Argument(help="Image profile (default: every profile).")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write <profile>.Dockerfile and docker-compose.yml here."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files there that fdl did not write.")
    ] = False,
) -> None:
    """Print the generated Dockerfile(s), or write them with the compose file.

    With -o, the project's .dockerignore is written too (unless it is your own). Files of
    yours there (a docker-compose.yml fdl did not write) are refused unless --force.

    Example: fdl image render train -o docker/
    """
    raise typer.Exit(actions.render(ctx.obj, [profile] if profile else [], output, force=force))


@app.command()
def build(
    ctx: typer.Context,
    profiles: Annotated[
        list[str] | None, typer.Argument(help="Image profiles (default: every profile).")
    ] = None,
    tag: Annotated[
        str | None, typer.Option("--tag", "-t", help="Image name (one profile only).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Build every step again.")] = False,
    push: Annotated[bool, typer.Option("--push", help="Push the images when built.")] = False,
    all_cells: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Build the ci: matrix (every profile x variant, as CI does), in dependency order.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build images with BuildKit; report their size against the smallest possible.

    Example: fdl image build train --tag registry.example.com/me/train:1 --push
    """
    if all_cells:
        from fdl.cli._ci_build import build_all

        raise typer.Exit(
            build_all(
                ctx.obj, profiles or [], tag=tag, no_cache=no_cache, push=push, as_json=as_json
            )
        )
    raise typer.Exit(
        actions.build(
            ctx.obj, profiles or [], tag=tag, no_cache=no_cache, push=push, as_json=as_json
        )
    )


@app.command()
def size(
    ctx: typer.Context,
    profile: Annotated[
        str | None, typer.Argument(help="Image profile (default: every built one).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a built image's size per layer, its base, and its floor (base + program +
    the libraries it loads).

    Example: fdl image size train
    """
    raise typer.Exit(actions.size(ctx.obj, [profile] if profile else [], as_json=as_json))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    ctx: typer.Context,
    profile: Annotated[str, typer.Argument(help="A training image profile.")],
    args: Annotated[
        list[str] | None, typer.Argument(help="Arguments for the program (after --).")
    ] = None,
) -> None:
    """Run a training image with the project's directories mounted as declared
    (GPUs passed through when the host has them).

    Example: fdl image run train -- --steps 100
    """
    raise typer.Exit(actions.run(ctx.obj, profile, args or []))
