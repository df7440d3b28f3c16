"""``fdl libtorch``: libtorch variants side by side, one active.

Each command binds its options, calls the library (:mod:`fdl.libtorch`) and renders what
it returns as text or ``--json``. ``fdl libtorch build`` is in :mod:`.libtorch_build`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._progress import ProgressLine, human_bytes
from fdl.cli._render import (
    render_checks,
    render_install,
    render_selection,
    report_install,
    summary_line,
)
from fdl.cli._variant_view import list_variants, show_info
from fdl.cli.commands._common import JsonOption, group
from fdl.cli.commands._team import credentials, look_up, team_registry
from fdl.cli.commands._team import pull as pull_reference
from fdl.cli.commands.libtorch_build import build
from fdl.errors import ExitCode, UsageError
from fdl.libtorch import variants
from fdl.paths import cache_dir, own_cache_dir

if TYPE_CHECKING:
    from fdl.cli._session import Session
    from fdl.libtorch import DownloadPlan, LibtorchSettings, VariantInfo

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
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (needed without a terminal).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
    ] = False,
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
    if not yes:
        if not session.interactive:
            raise UsageError(
                f"fdl libtorch remove deletes {what}; there is no terminal to ask",
                hint=f"confirm with: fdl libtorch remove {name} --yes",
            )
        if not session.confirm(f"delete {what}?"):
            session.console.info("nothing deleted")
            return
    was_active = variants.remove(context, name, on_wait=session.console.info)
    if as_json:
        session.console.json({"removed": name, "was_active": was_active, "bytes": size})
        return
    session.console.info(f"removed {name}" + ("" if linked else f", {human_bytes(size)} freed"))
    if was_active:
        session.console.info("it was the active variant: no variant is active now")
        session.console.info("set one with: fdl libtorch activate <variant>")


@app.command()
def download(
    ctx: typer.Context,
    cpu: Annotated[bool, typer.Option("--cpu", help="The CPU build.")] = False,
    cuda: Annotated[
        str | None,
        typer.Option("--cuda", help="The build for this CUDA version (12.6, 13.0, ...)."),
    ] = None,
    rocm: Annotated[
        str | None,
        typer.Option(
            "--rocm",
            help="The ROCm build for AMD GPUs (7.0, 7.1), installed as precompiled/rocm70.",
        ),
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch",
            help="PyTorch version (2.14 or 2.14.1; default: libtorch.torch, else the framework's, "
            "else the newest).",
        ),
    ] = None,
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
    """Download an official libtorch zip; without --cpu/--cuda/--rocm, the one that fits
    the GPUs.

    Example: fdl libtorch download --cuda 12.6 --torch 2.13
    """
    from fdl.cli._learn import pypi_url
    from fdl.cli._newer import newer_release_note
    from fdl.libtorch import (
        check_download_target,
        plan_download,
        run_download,
        select_rocm,
        select_variant,
    )
    from fdl.system import detect_gpus

    session: Session = ctx.obj
    console = session.console
    context = session.libtorch_context()
    settings = session.libtorch_settings()
    if rocm is not None and (cpu or cuda):
        raise UsageError(
            "--rocm cannot be combined with --cpu or --cuda", hint="pass one of them, or none"
        )
    wanted = settings.torch_for(torch)
    if rocm is not None:
        from fdl.system.resources import glibc_version

        selection = select_rocm(wanted, rocm, glibc=glibc_version())
    else:
        report = detect_gpus()
        if wanted is None:  # fdl picks the newest release: say when PyPI has a newer one
            newer_release_note(console, session.environ, pypi=pypi_url(session.environ))
        selection = select_variant(
            report.capabilities,
            cpu=cpu,
            cuda=cuda,
            torch=wanted,
            preferred=None if (cpu or cuda) else settings.variant,
            driver=report.driver,
            preferred_origin=settings.variant_origin,
        )
    plan = plan_download(
        selection,
        context,
        cache_dir(session.environ),
        name=name,
        path=path,
        mirror=mirror or settings.mirror,
        activate=not no_activate,
    )
    if dry_run:
        check_download_target(plan, context, force=force)  # what the run would refuse
        if as_json:
            console.json({**plan.to_json(), "dry_run": True})
        else:
            console.out(_render_download(plan, dry_run=True), end="")
        return
    for line in _render_download(plan, dry_run=False).splitlines():
        console.info(line)
    progress = ProgressLine(console, f"downloading {plan.label}")
    try:
        result = run_download(
            plan,
            context,
            force=force,
            keep_archive=keep_archive,
            on_progress=progress.bytes,
            on_message=progress.message,
        )
    finally:
        progress.close()
    if as_json:
        console.json(result.to_json())
    else:
        for line in render_install(result):
            console.info(line)


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
            "--torch",
            help="pip download torch==VERSION (default: libtorch.torch, else the framework's, "
            "else the newest).",
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
    from_registry: Annotated[
        bool,
        typer.Option(
            "--from-registry",
            help="Pull the team registry's variant that fits the GPUs (the default when "
            "libtorch.registry is set and no other source is given).",
        ),
    ] = False,
    name: NameOption = None,
    no_nvidia: Annotated[
        bool,
        typer.Option(
            "--no-nvidia", help="CUDA wheels: do not bring the NVIDIA libraries into the variant."
        ),
    ] = False,
    cpu: Annotated[
        bool,
        typer.Option(
            "--cpu",
            help="A CPU variant: of a CUDA wheel, only what a CPU program loads, read out of "
            "the index's wheels (~130 MB instead of 3-4 GB). Implied by libtorch.variant: cpu "
            "when no wheel file or --python is given.",
        ),
    ] = False,
    no_activate: NoActivateOption = False,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Install a variant from a PyTorch wheel (file, Python environment, or pip download).

    \b
    Examples:
      fdl libtorch install --from-wheel --torch 2.13.0
      fdl libtorch install --from-wheel --cpu --torch 2.10.0
    """
    from fdl.libtorch import check_wheel, install_dir, install_wheel, wheel_source
    from fdl.runner import default_runner

    session: Session = ctx.obj
    sources = [s for s in (wheel, python, torch) if s]
    other = from_dir is not None or from_wheel or wheel is not None or python is not None
    if from_registry or (not other and team_registry(session)):
        if other:
            raise UsageError("--from-registry takes no other source", hint="pass one source")
        _install_shared(
            session, torch, name, activate=not no_activate, force=force, as_json=as_json
        )
        return
    if from_dir is None and not (from_wheel or wheel is not None):
        raise UsageError(
            "say where the libtorch comes from: --from-wheel [WHEEL | --python PY | --torch V], "
            "--from-dir DIR or --from-registry",
            hint="e.g. fdl libtorch install --from-wheel --torch 2.13.0",
        )
    if from_dir is not None and (from_wheel or sources):
        raise UsageError("--from-dir and --from-wheel are mutually exclusive", hint="pass one")
    if len(sources) > 1:
        raise UsageError(
            "give one wheel source: a .whl file, --python or --torch", hint="pass only one of them"
        )
    context = session.libtorch_context()
    settings = session.libtorch_settings()
    if from_dir is None and python is None and (cpu or _pinned_cpu(settings, name, wheel)):
        _install_cpu_view(session, wheel, torch, index_url, name, no_activate, force, as_json)
        return
    if cpu:
        raise UsageError(
            "--cpu reads a wheel file or the index's wheel, not --python or --from-dir",
            hint="fdl libtorch install --from-wheel --cpu --torch VERSION",
        )
    if from_dir is not None:
        result = install_dir(
            context,
            from_dir,
            name=name,
            force=force,
            activate=not no_activate,
            on_wait=session.console.info,
        )
        report_install(session.console, result, as_json=as_json)
        return
    runner = default_runner()
    cache = own_cache_dir(cache_dir(session.environ) / "wheels")
    wanted = settings.torch_for(torch)
    progress = ProgressLine(session.console, "install from wheel")
    try:
        source = wheel_source(
            cache=cache,
            runner=runner,
            wheel=wheel,
            python=python,
            torch=wanted,
            index_url=index_url,
            on_message=progress.message,
            on_line=progress.status,
        )
        if wheel is not None or python is not None:  # its release is known only now
            settings.framework.require(source.torch_version, "the wheel's torch")
        check_wheel(
            source,
            torch=wanted if wheel is None and python is None else None,
            variant=settings.variant if not name else None,
            index_url=index_url,
            variant_origin=settings.variant_origin,
        )
        result = install_wheel(
            context,
            source,
            cache=cache,
            runner=runner,
            name=name,
            force=force,
            nvidia=not no_nvidia,
            index_url=index_url,
            activate=not no_activate,
            on_message=progress.message,
            on_line=progress.status,
        )
    finally:
        progress.close()
    report_install(session.console, result, as_json=as_json)
    _warn_coverage(session, result.info)


def _warn_coverage(session: Session, info: VariantInfo) -> None:
    """A wheel's build is known once installed: warn, as a download's plan does, when its
    binaries have no code for a GPU here (cu128 on a GTX 1060, sm_61)."""
    from fdl.libtorch import installed_coverage
    from fdl.system import detect_gpus

    report = detect_gpus()
    found = installed_coverage(
        info.name,
        info.cuda,
        info.archs_found,
        report.capabilities,
        torch=info.torch,
        driver=report.driver,
    )
    if found is not None:
        session.console.warn(found[0])
        session.console.line(f"  fix: {found[1]}")


def _pinned_cpu(settings: LibtorchSettings, name: str | None, wheel: Path | None) -> bool:
    """The manifest pins the CPU build (``libtorch.variant: cpu``), no --name overrides and
    no wheel file is named (a file is installed as the build it is, or refused: --cpu makes
    its CPU view)."""
    return settings.variant == "cpu" and not name and wheel is None


def _install_cpu_view(
    session: Session,
    wheel: Path | None,
    torch: str | None,
    index_url: str | None,
    name: str | None,
    no_activate: bool,
    force: bool,
    as_json: bool,
) -> None:
    """``install --from-wheel --cpu``: the CPU view of the wheel (file or index)."""
    from fdl.libtorch import install_cpu_view, local_wheel
    from fdl.net import Progress

    settings = session.libtorch_settings()
    if wheel is not None:  # its release is known from its name
        release = local_wheel(wheel.expanduser()).version.split("+", 1)[0]
        settings.framework.require(release, "the wheel's torch")
    wanted = settings.torch_for(torch) if wheel is None else None
    cache = own_cache_dir(cache_dir(session.environ) / "wheels")
    lines: dict[str, ProgressLine] = {}

    def on_progress(what: str, state: Progress) -> None:
        line = lines.get(what)
        if line is None:
            for other in lines.values():
                other.close()
            line = lines[what] = ProgressLine(session.console, f"reading {what}")
        line.bytes(state.done, state.total, state.rate)

    status = ProgressLine(session.console, "CPU view")
    try:
        result = install_cpu_view(
            session.libtorch_context(),
            cache=cache,
            torch=wanted,
            wheel=wheel,
            index_url=index_url,
            name=name,
            force=force,
            activate=not no_activate,
            on_message=status.message,
            on_progress=on_progress,
        )
    finally:
        for line in lines.values():
            line.close()
        status.close()
    report_install(session.console, result, as_json=as_json)


def _install_shared(
    session: Session,
    torch: str | None,
    name: str | None,
    *,
    activate: bool,
    force: bool,
    as_json: bool,
) -> None:
    """``install --from-registry``: the team's variant of the release that runs on the GPUs."""
    from fdl.errors import EnvironmentProblem
    from fdl.libtorch import select_variant
    from fdl.system import detect_gpus

    registry = team_registry(session)
    if not registry:
        raise UsageError(
            "--from-registry: no team registry",
            hint="set `libtorch.registry:` in fdl.yml or $FDL_LIBTORCH_REGISTRY",
        )
    settings = session.libtorch_settings()
    report = detect_gpus()
    release = select_variant(
        report.capabilities, torch=torch or settings.torch, driver=report.driver
    ).torch_version
    match = look_up(
        session,
        registry,
        torch=release,
        gpus=report.capabilities,
        driver=report.driver,
        missing_ok=False,  # asked for by name: a mistyped one is not "none fits"
    )
    if match is None:
        raise EnvironmentProblem(
            f"the team's registry {registry} holds no torch {release} variant that runs on "
            "these GPUs",
            hint="build one and share it: fdl libtorch build --push (or fdl libtorch download)",
        )
    session.console.info(f"plan: {match.reason()}")
    result = pull_reference(session, match.remote.pinned, name=name, activate=activate, force=force)
    if as_json:
        session.console.json(result.to_json())
    else:
        report_install(session.console, result.install, as_json=False)


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
        chosen, directory = path.name, path.expanduser().absolute()
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


@app.command()
def pull(
    ctx: typer.Context,
    reference: Annotated[
        str,
        typer.Argument(help="host[:port]/namespace/name:TAG or ...@sha256:DIGEST."),
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", help="Variant name (default: builds/<tag> or precompiled/<tag>)."),
    ] = None,
    no_activate: NoActivateOption = False,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Install a variant from an OCI registry (no docker needed); resumes an interrupted pull.

    Blobs are checked against their digests, layers extracted with the archive rules, and
    a variant whose binaries hold other archs than its annotations claim is refused.

    Example: fdl libtorch pull registry.example.com/team/libtorch:2.10.0-cu129-sm61-sm120
    """
    session: Session = ctx.obj
    result = pull_reference(session, reference, name=name, activate=not no_activate, force=force)
    if as_json:
        session.console.json(result.to_json())
        return
    session.console.info(f"{result.reference} (built by {result.built_by})")
    report_install(session.console, result.install, as_json=False)


app.command("build")(build)


def _render_download(plan: DownloadPlan, *, dry_run: bool) -> str:
    selection = plan.selection
    what = (
        f"ROCm {selection.rocm}"
        if selection.rocm
        else f"CUDA {selection.cuda}"
        if selection.cuda
        else "CPU"
    )
    lines = [
        f"libtorch {selection.torch_version} ({selection.variant}, {what})",
        f"  variant:  {plan.target.name or '(outside the variant root)'}",
        f"  url:      {plan.url}",
    ]
    if plan.mirror:
        lines.append(f"  upstream: {plan.upstream_url}")
    lines += [f"  target:   {plan.target.path}", *render_selection(selection)]
    lines += [f"  note:     {n}" for n in plan.notes]
    if dry_run:
        activation = "activate it" if plan.activate else "leave the active variant as it is"
        lines.append(
            f"[dry-run] would download, check build-version {selection.build_version}, "
            f"extract and {activation}"
        )
    return "\n".join(lines) + "\n"
