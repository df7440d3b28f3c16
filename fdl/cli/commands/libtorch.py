"""``fdl libtorch``: libtorch variants side by side, one active."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli import _libtorch_actions as actions
from fdl.cli._libtorch_install import InstallOptions
from fdl.cli._libtorch_install import install as install_action
from fdl.cli.commands._common import JsonOption, group

app = group(
    "libtorch",
    "Install, verify and switch libtorch variants (official zips, PyPI wheels, "
    "source builds).\n\nExample: fdl libtorch download --dry-run",
    no_args_is_help=True,
)

VariantArgument = Annotated[
    str | None,
    typer.Argument(help="precompiled/<name> or builds/<name> (default: the active one)."),
]
TorchOption = Annotated[
    str | None,
    typer.Option(
        "--torch", help="PyTorch version (2.14 or 2.14.1; default: libtorch.torch or the newest)."
    ),
]
NameOption = Annotated[
    str | None,
    typer.Option("--name", help="Variant name under precompiled/ (default: cpu, cu130, ...)."),
]
NoActivateOption = Annotated[
    bool, typer.Option("--no-activate", help="Install without making it the active variant.")
]
ForceOption = Annotated[bool, typer.Option("--force", help="Reinstall, replacing what is there.")]


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the installed variants; the active one is marked.

    Example: fdl libtorch list --json
    """
    raise typer.Exit(actions.list_variants(ctx.obj, as_json=as_json))


@app.command()
def info(ctx: typer.Context, variant: VariantArgument = None, as_json: JsonOption = False) -> None:
    """What a variant is: torch, CUDA, archs found in its binaries, where it came from.

    Example: fdl libtorch info precompiled/cu130
    """
    raise typer.Exit(actions.info(ctx.obj, variant, as_json=as_json))


@app.command()
def activate(
    ctx: typer.Context,
    variant: Annotated[str, typer.Argument(help="precompiled/<name> or builds/<name>.")],
    as_json: JsonOption = False,
) -> None:
    """Make an installed variant the active one (libtorch/.active).

    Example: fdl libtorch activate builds/sm61-sm120
    """
    raise typer.Exit(actions.activate(ctx.obj, variant, as_json=as_json))


@app.command()
def remove(
    ctx: typer.Context,
    variant: Annotated[str, typer.Argument(help="precompiled/<name> or builds/<name>.")],
    as_json: JsonOption = False,
) -> None:
    """Delete an installed variant (clears the active pointer if it was active).

    Example: fdl libtorch remove precompiled/cu126
    """
    raise typer.Exit(actions.remove(ctx.obj, variant, as_json=as_json))


@app.command()
def download(
    ctx: typer.Context,
    cpu: Annotated[bool, typer.Option("--cpu", help="The CPU build.")] = False,
    cuda: Annotated[
        str | None,
        typer.Option("--cuda", help="The build for this CUDA version (12.6, 13.0, ...)."),
    ] = None,
    torch: TorchOption = None,
    path: Annotated[
        Path | None, typer.Option("--path", help="Install into this directory instead.")
    ] = None,
    name: NameOption = None,
    mirror: Annotated[
        str | None,
        typer.Option(
            "--mirror",
            help="Base URL of a download.pytorch.org mirror (else $FDL_LIBTORCH_MIRROR, libtorch.mirror).",
        ),
    ] = None,
    no_activate: NoActivateOption = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan (URL, target, why); download nothing.")
    ] = False,
    force: ForceOption = False,
    keep_archive: Annotated[
        bool, typer.Option("--keep-archive", help="Keep the zip in the cache after installing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Download an official libtorch zip; without --cpu/--cuda, the one that fits the GPUs.

    Example: fdl libtorch download --cuda 12.6 --torch 2.13
    """
    options = actions.DownloadOptions(
        cpu=cpu,
        cuda=cuda,
        torch=torch,
        path=path,
        name=name,
        mirror=mirror,
        activate=not no_activate,
        dry_run=dry_run,
        force=force,
        keep_archive=keep_archive,
        as_json=as_json,
    )
    raise typer.Exit(actions.download(ctx.obj, options))


@app.command()
def install(
    ctx: typer.Context,
    wheel: Annotated[
        Path | None, typer.Argument(help="A torch .whl file (with --from-wheel).")
    ] = None,
    from_wheel: Annotated[
        bool, typer.Option("--from-wheel", help="Make the variant from a PyTorch wheel.")
    ] = False,
    python: Annotated[
        str | None, typer.Option("--python", help="Take the torch installed for this Python.")
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch", help="pip download torch==VERSION (default: libtorch.torch or the newest)."
        ),
    ] = None,
    index_url: Annotated[
        str | None,
        typer.Option("--index-url", help="Package index for pip (else pip's configuration)."),
    ] = None,
    from_dir: Annotated[
        Path | None,
        typer.Option("--from-dir", help="Adopt an unpacked libtorch directory (copied)."),
    ] = None,
    name: NameOption = None,
    no_nvidia: Annotated[
        bool,
        typer.Option(
            "--no-nvidia", help="CUDA wheels: do not bring the NVIDIA libraries into the variant."
        ),
    ] = False,
    no_activate: NoActivateOption = False,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Install a variant from a PyTorch wheel (file, Python environment, or pip download).

    Example: fdl libtorch install --from-wheel --torch 2.13.0
    """
    options = InstallOptions(
        from_wheel=from_wheel or wheel is not None,
        from_dir=from_dir,
        wheel=wheel,
        python=python,
        torch=torch,
        index_url=index_url,
        name=name,
        nvidia=not no_nvidia,
        activate=not no_activate,
        force=force,
        as_json=as_json,
    )
    raise typer.Exit(install_action(ctx.obj, options))


@app.command()
def verify(
    ctx: typer.Context,
    variant: VariantArgument = None,
    path: Annotated[
        Path | None, typer.Option("--path", help="Verify the libtorch tree in this directory.")
    ] = None,
    cmake: Annotated[
        bool,
        typer.Option(
            "--cmake", help="Also build and run a small C++ program with find_package(Torch)."
        ),
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the smoke program's build directory.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Check a variant: files, GPU archs in its binaries vs metadata vs GPUs, dependencies.

    Exits with 1 when a check finds an error.

    Example: fdl libtorch verify --cmake
    """
    raise typer.Exit(
        actions.verify(ctx.obj, variant, path=path, cmake=cmake, keep=keep, as_json=as_json)
    )


# --- `fdl libtorch build` --------------------------------------------------------------------
# The source-build planner registers its command here (fdl/cli/commands/libtorch_build.py
# defines `register(app)`); it installs its result through fdl.libtorch.register_variant.
def _register_build() -> None:
    from importlib import import_module

    try:
        module = import_module("fdl.cli.commands.libtorch_build")
    except ModuleNotFoundError as exc:
        if exc.name != "fdl.cli.commands.libtorch_build":
            raise
        return
    module.register(app)


_register_build()
