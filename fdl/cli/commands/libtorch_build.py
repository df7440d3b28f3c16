"""``fdl libtorch build``: libtorch from source for exactly the GPU archs you have.

The group module (``fdl.cli.commands.libtorch``) registers :func:`build` on its app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli._build_actions import BuildOptions
from fdl.cli._build_actions import build as build_action
from fdl.cli.commands._common import JsonOption

__all__ = ["build", "register"]


def build(
    ctx: typer.Context,
    archs: Annotated[
        str | None,
        typer.Option(
            "--archs",
            help="GPU archs: 6.1;12.0, 6.1,12.0, sm_61,sm_120, '61 120', 12.0a, 12.0+PTX, "
            "Pascal, Blackwell (default: the GPUs detected here).",
        ),
    ] = None,
    cuda: Annotated[
        str | None,
        typer.Option("--cuda", help="CUDA toolkit (default: the newest that compiles every arch)."),
    ] = None,
    torch: Annotated[
        str | None, typer.Option("--torch", help="PyTorch release (default: the newest known).")
    ] = None,
    docker: Annotated[
        bool, typer.Option("--docker", help="Build in a Docker builder image (BuildKit).")
    ] = False,
    native: Annotated[
        bool, typer.Option("--native", help="Build on this machine with its nvcc and compilers.")
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", min=1, help="Parallel jobs (default: what cores and RAM allow)."
        ),
    ] = None,
    ptx: Annotated[
        bool, typer.Option("--ptx", help="Add PTX of the newest arch (future GPUs JIT it).")
    ] = False,
    no_flash_attention: Annotated[
        bool,
        typer.Option(
            "--no-flash-attention", help="Skip the flash-attention kernels (hours, ~5 GB per job)."
        ),
    ] = False,
    cache: Annotated[
        str | None,
        typer.Option("--cache", help="Compiler cache: ccache (default), sccache or none."),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option("--recipe", help="A recipe name (see --list-recipes) or a .yml file."),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--source", help="Build this PyTorch checkout instead of cloning one."),
    ] = None,
    cpu: Annotated[bool, typer.Option("--cpu", help="CPU only (USE_CUDA=0).")] = False,
    base_image: Annotated[
        str | None,
        typer.Option("--base-image", help="Docker builder base (default: nvidia/cuda devel)."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Variant name under builds/ (default: sm61-sm120).")
    ] = None,
    no_activate: Annotated[
        bool, typer.Option("--no-activate", help="Do not make the result the active variant.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Start from an empty build tree (no resume).")
    ] = False,
    list_recipes: Annotated[
        bool, typer.Option("--list-recipes", help="List the recipes and exit.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the complete plan; run nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build libtorch from source for a set of GPU archs (e.g. sm_61 + sm_120), checked first.

    Example: fdl libtorch build --archs "6.1;12.0" --dry-run
    """
    from fdl.errors import UsageError

    if docker and native:
        raise UsageError("--docker and --native exclude each other", hint="choose one")
    if cache is not None and cache not in ("ccache", "sccache", "none"):
        raise UsageError(f"--cache {cache}: not a compiler cache", hint="ccache, sccache or none")
    options = BuildOptions(
        archs=archs,
        cpu=cpu,
        cuda=cuda,
        torch=torch,
        backend="docker" if docker else "native" if native else None,
        jobs=jobs,
        ptx=ptx,
        no_flash_attention=no_flash_attention,
        cache=cache,
        recipe=recipe,
        source=source,
        base_image=base_image,
        name=name,
        no_activate=no_activate,
        fresh=fresh,
        dry_run=dry_run,
        as_json=as_json,
        list_recipes=list_recipes,
    )
    raise typer.Exit(build_action(ctx.obj, options))


def register(app: typer.Typer) -> None:
    """Add ``build`` to the ``fdl libtorch`` group (called by fdl.cli.commands.libtorch)."""
    app.command("build")(build)
