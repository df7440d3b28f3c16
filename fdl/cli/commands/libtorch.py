"""``fdl libtorch``: libtorch variants side by side, one active.

Each command binds its options, calls the library (:mod:`fdl.libtorch`) and renders what
it returns as text or ``--json``. The commands that install from a source (``download``,
``install``, ``pull``) are in :mod:`.libtorch_install`, ``fdl libtorch build`` in
:mod:`.libtorch_build`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._progress import ProgressLine, human_bytes
from fdl.cli._render import render_checks, summary_line
from fdl.cli._variant_view import list_variants, show_info
from fdl.cli.commands._common import (
    DryRunOption,
    JsonOption,
    YesOption,
    confirm_delete,
    group,
)
from fdl.cli.commands._team import credentials, team_registry
from fdl.cli.commands.libtorch_build import build
from fdl.cli.commands.libtorch_install import download, install, pull
from fdl.errors import ExitCode, UsageError
from fdl.libtorch import variants
from fdl.paths import cache_dir, own_cache_dir

if TYPE_CHECKING:
    from fdl.cli._session import Session

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


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the installed variants; the active one is marked.

    Example: fdl libtorch list --json
    """
    list_variants(ctx.obj, as_json=as_json)


@app.command()
def info(ctx: typer.Context, variant: VariantArgument = None, as_json: JsonOption = False) -> None:
    """What a variant is: torch, CUDA, archs found in its binaries, where it came from.

    Example: fdl libtorch info precompiled/cu130
    """
    show_info(ctx.obj, variant, as_json=as_json)


@app.command()
def activate(
    ctx: typer.Context,
    variant: Annotated[str, typer.Argument(help="precompiled/<name> or builds/<name>.")],
    as_json: JsonOption = False,
) -> None:
    """Make an installed variant the active one (libtorch/.active).

    Example: fdl libtorch activate builds/sm61-sm120
    """
    session: Session = ctx.obj
    context = session.libtorch_context()
    chosen = variants.activate(context, variant)
    if as_json:
        session.console.json({"active": chosen, "root": str(context.root)})
    else:
        session.console.info(f"active variant: {chosen} ({context.label()})")


@app.command()
def remove(
    ctx: typer.Context,
    variant: Annotated[
        str, typer.Argument(help="precompiled/<name>, builds/<name>, or a short name (cu126).")
    ],
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Delete an installed variant (clears the active pointer if it was active). Asks first
    in a terminal; give --yes otherwise.

    Example: fdl libtorch remove cu126 --dry-run
    """
    from fdl._files import tree_size

    session: Session = ctx.obj
    context = session.libtorch_context()
    name = variants.resolve_installed(context, variant)
    path = context.libtorch_dir / name
    linked = path.is_symlink()
    size = 0 if linked else tree_size(path)
    active = variants.active_name(context) == name
    what = f"{name} ({'a link to ' + str(path.resolve()) if linked else human_bytes(size)}" + (
        ", the active variant)" if active else ")"
    )
    if dry_run:
        if as_json:
            session.console.json(
                {
                    "remove": name,
                    "path": str(path),
                    "bytes": size,
                    "active": active,
                    "dry_run": True,
                }
            )
        else:
            session.console.out(f"[dry-run] would delete {what} at {path}")
        return
    if not confirm_delete(session, what, "fdl libtorch remove", [name], yes=yes):
        return
    was_active = variants.remove(context, name, on_wait=session.console.info)
    if as_json:
        session.console.json({"removed": name, "was_active": was_active, "bytes": size})
        return
    session.console.info(f"removed {name}" + ("" if linked else f", {human_bytes(size)} freed"))
    if was_active:
        session.console.info("it was the active variant: no variant is active now")
        session.console.info("set one with: fdl libtorch activate <variant>")


app.command()(download)
app.command()(install)


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
    from fdl.libtorch import smoke_runner, verify_variant
    from fdl.runner import default_runner
    from fdl.system import detect_gpus

    session: Session = ctx.obj
    if path is not None:
        chosen, directory = path.name, Path(os.path.expanduser(path)).absolute()
        if not (directory / "lib").is_dir():
            raise UsageError(
                f"{directory} is not a libtorch tree (no lib/)", hint="pass a variant directory"
            )
    else:
        context = session.libtorch_context()
        chosen = variants.installed_or_active(context, variant)
        directory = context.libtorch_dir / chosen
    progress = ProgressLine(session.console, f"verify {chosen}")
    work_dir = own_cache_dir(cache_dir(session.environ) / "smoke") / chosen.replace("/", "-")
    smoke = None
    if cmake:
        smoke = smoke_runner(
            directory,
            work_dir,
            runner=default_runner(),
            environ=session.environ,
            on_line=progress.status,
        )
    try:
        # the fixes install the project's torch (its framework's), not the variant's
        torch = session.libtorch_settings().torch
        from fdl.system.survey import survey

        nvidia = detect_gpus()
        found = survey(session.environ, nvidia=nvidia)
        amd = [d.arch for d in found.devices if d.vendor == "amd"]
        report = verify_variant(directory, chosen, gpus=nvidia, smoke=smoke, torch=torch, amd=amd)
    finally:
        progress.close()
    if report.smoke is not None and report.smoke.ok and not keep:
        import shutil

        shutil.rmtree(work_dir, ignore_errors=True)
    if as_json:
        session.console.json(report.to_json())
    else:
        session.console.out(f"libtorch variant {chosen} ({directory})\n")
        session.console.out(render_checks(session.console, report.checks), end="")
        session.console.out(f"\n{summary_line(report.checks)}")
    if not report.ok:
        raise typer.Exit(int(ExitCode.FAILURE))


CompressionOption = Annotated[
    str,
    typer.Option(
        "--compression",
        help="Layer compression: auto (zstd when fdl can write it), zstd or gzip "
        "(for Docker Engine before 23.0).",
    ),
]


@app.command()
def push(
    ctx: typer.Context,
    variant: VariantArgument = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="The repository, host[:port]/namespace/name (else $FDL_LIBTORCH_REGISTRY, "
            "libtorch.registry).",
        ),
    ] = None,
    tag: Annotated[
        str | None,
        typer.Option("--tag", help="Tag (default: what it is, such as 2.10.0-cu129-sm61-sm120)."),
    ] = None,
    compression: CompressionOption = "auto",
    as_json: JsonOption = False,
) -> None:
    """Push a variant to an OCI registry, tagged by what it is; prints its digest.

    The image holds the tree under libtorch/ and what it is (torch, CUDA, archs read
    from its binaries) as annotations; teammates install it with fdl libtorch pull.

    Example: fdl libtorch push builds/sm61-sm120 --to registry.example.com/team/libtorch
    """
    from fdl.libtorch import push_variant

    session: Session = ctx.obj
    context = session.libtorch_context()
    chosen = variants.installed_or_active(context, variant)
    repository = team_registry(session, to)
    if not repository:
        raise UsageError(
            "no registry to push to",
            hint="pass --to host/namespace/name, set $FDL_LIBTORCH_REGISTRY, or "
            "`libtorch.registry:` in fdl.yml",
        )
    progress = ProgressLine(session.console, f"push {chosen}")
    try:
        result = push_variant(
            context,
            chosen,
            repository,
            credentials=credentials(session),
            compression=compression,
            tag=tag,
            on_line=progress.message,
        )
    finally:
        progress.close()
    for warning in result.warnings:
        session.console.warn(warning)
    if as_json:
        session.console.json(result.to_json())
        return
    stored = sum(layer.size for layer in result.layers)
    if not result.packed:
        session.console.info(
            f"{repository}:{result.tag} already holds {chosen} as this tree was pushed "
            f"({human_bytes(stored)} of {result.compression} layers): nothing packed or uploaded"
        )
    else:
        session.console.info(
            f"pushed {chosen} as {repository}:{result.tag} ({human_bytes(stored)}, "
            f"{result.uploaded} new blobs; {result.compression} layers: {result.reason})"
        )
    session.console.out(result.reference)


app.command()(pull)
app.command("build")(build)
