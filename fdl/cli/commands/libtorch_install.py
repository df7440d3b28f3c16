"""``fdl libtorch download``, ``install`` and ``pull``: a variant from one source.

Each binds its options, says what it needs (:func:`fdl.libtorch.need_for`,
:func:`fdl.libtorch.install_need`), gathers the facts, and lets the chooser
(:func:`fdl.libtorch.choose_source`) take the source; then it installs from it and renders
what that returns. ``--dry-run`` shows the ranked offers (``choice`` in ``--json``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._progress import ProgressLine
from fdl.cli._render import render_install, render_selection, report_install
from fdl.cli.commands._common import JsonOption, TorchOption
from fdl.cli.commands._team import look_up, team_registry
from fdl.cli.commands._team import pull as pull_reference
from fdl.errors import UsageError
from fdl.paths import cache_dir, own_cache_dir

if TYPE_CHECKING:
    from fdl.cli._session import Session
    from fdl.libtorch import Choice, DownloadPlan, LibtorchSettings, Need, VariantInfo

__all__ = ["ForceOption", "NameOption", "NoActivateOption", "download", "install", "pull"]

NameOption = Annotated[
    str | None,
    typer.Option("--name", help="Variant name under precompiled/ (default: cpu, cu130, ...)."),
]
NoActivateOption = Annotated[
    bool, typer.Option("--no-activate", help="Install without making it the active variant.")
]
ForceOption = Annotated[bool, typer.Option("--force", help="Reinstall, replacing what is there.")]


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
    """Download an official libtorch zip; without --cpu/--cuda/--rocm, the one that fits
    the GPUs.

    Example: fdl libtorch download --cuda 12.6 --torch 2.13
    """
    from fdl.cli._learn import pypi_url
    from fdl.cli._newer import newer_release_note
    from fdl.libtorch import (
        check_download_target,
        choose_source,
        need_for,
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
    need = need_for(selection, "libtorch download", sources=OFFICIAL, asked=("archive",), only=True)
    choice = choose_source(need)
    if dry_run:
        check_download_target(plan, context, force=force)  # what the run would refuse
        if as_json:
            console.json({**plan.to_json(), "choice": choice.to_json(), "dry_run": True})
        else:
            console.out(_render_download(plan, dry_run=True, choice=choice), end="")
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
    torch: TorchOption = None,
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
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the source chosen and why; install nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Install a variant from a PyTorch wheel (file, Python environment, or pip download).

    \b
    Examples:
      fdl libtorch install --from-wheel --torch 2.13.0
      fdl libtorch install --from-wheel --cpu --torch 2.10.0
    """
    from fdl.libtorch import (
        Facts,
        check_wheel,
        choose_source,
        install_dir,
        install_need,
        install_wheel,
        wheel_source,
    )
    from fdl.runner import default_runner

    session: Session = ctx.obj
    settings = session.libtorch_settings()
    need, given = install_need(
        directory=from_dir,
        wheel=wheel,
        python=python,
        torch=torch,
        from_wheel=from_wheel,
        from_registry=from_registry,
        cpu=cpu,
        registry=team_registry(session),
        pinned_cpu=_pinned_cpu(settings, name, wheel),
    )
    if need.asked == ("registry",):
        _install_shared(
            session,
            need,
            torch,
            name,
            activate=not no_activate,
            force=force,
            dry_run=dry_run,
            as_json=as_json,
        )
        return
    choice = choose_source(need, Facts(given=given))
    if dry_run:
        show_choice(session, choice, as_json=as_json)
        return
    context = session.libtorch_context()
    if choice.source == "cpu-view":
        _install_cpu_view(session, wheel, torch, index_url, name, no_activate, force, as_json)
        return
    if choice.source == "directory" and from_dir is not None:
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
        release = local_wheel(Path(os.path.expanduser(wheel))).version.split("+", 1)[0]
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
    need: Need,
    torch: str | None,
    name: str | None,
    *,
    activate: bool,
    force: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """``install --from-registry``: the team's variant of the release that runs on the GPUs
    (``need``: what ``install_need`` made of the options, asking the registry)."""
    from dataclasses import replace

    from fdl.errors import EnvironmentProblem
    from fdl.libtorch import Facts, choose_source, select_variant
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
    need = replace(need, torch=release)
    choice = choose_source(need, Facts(registry, match, looked=frozenset({"registry"})))
    if choice.chosen is None or match is None:
        raise EnvironmentProblem(
            f"the team's registry {registry} holds no torch {release} variant that runs on "
            "these GPUs",
            hint="build one and share it: fdl libtorch build --push (or fdl libtorch download)",
        )
    if dry_run:
        show_choice(session, choice, as_json=as_json)
        return
    session.console.info(f"plan: {match.reason()}")
    result = pull_reference(session, match.remote.pinned, name=name, activate=activate, force=force)
    if as_json:
        session.console.json(result.to_json())
    else:
        report_install(session.console, result.install, as_json=False)


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
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be pulled; pull nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Install a variant from an OCI registry (no docker needed); resumes an interrupted pull.

    Blobs are checked against their digests, layers extracted with the archive rules, and
    a variant whose binaries hold other archs than its annotations claim is refused.

    Example: fdl libtorch pull registry.example.com/team/libtorch:2.10.0-cu129-sm61-sm120
    """
    from fdl.libtorch import Facts, Need, choose_source, parse_reference

    session: Session = ctx.obj
    if dry_run:
        parse_reference(reference)  # a malformed one exits 2, as the pull would
        need = Need("libtorch pull", sources=("registry",), asked=("registry",), only=True)
        show_choice(
            session, choose_source(need, Facts(given={"registry": reference})), as_json=as_json
        )
        return
    result = pull_reference(session, reference, name=name, activate=not no_activate, force=force)
    if as_json:
        session.console.json(result.to_json())
        return
    session.console.info(f"{result.reference} (built by {result.built_by})")
    report_install(session.console, result.install, as_json=False)


OFFICIAL = ("archive", "wheel", "cpu-view")
"""The sources ``download``'s offers are shown beside (it takes the archive)."""


def _render_download(plan: DownloadPlan, *, dry_run: bool, choice: Choice | None = None) -> str:
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
    lines += choice.lines() if choice is not None else []
    if dry_run:
        activation = "activate it" if plan.activate else "leave the active variant as it is"
        lines.append(
            f"[dry-run] would download, check build-version {selection.build_version}, "
            f"extract and {activation}"
        )
    return "\n".join(lines) + "\n"


def show_choice(session: Session, choice: Choice, *, as_json: bool) -> None:
    """A ``--dry-run``'s answer: the source chosen, and the offers ranked."""
    if as_json:
        session.console.json({"choice": choice.to_json(), "dry_run": True})
        return
    chosen = choice.chosen
    head = f"[dry-run] would install from {chosen.source}: {chosen.why}" if chosen else ""
    session.console.out("\n".join([head, *choice.lines()]).lstrip("\n"))
