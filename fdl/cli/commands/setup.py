"""``fdl setup``: the guided path for a new machine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from fdl._text import printable
from fdl.cli._progress import ProgressLine
from fdl.cli._render import render_install, render_selection, warn_unresolved
from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, ShowPlanOption, TorchOption, group
from fdl.compat import check_gpu_driver
from fdl.libtorch import Choice, Facts, SetupPlan, choose_setup, plan_setup, run_setup
from fdl.paths import Context, cache_dir
from fdl.system import GpuReport, detect_gpus

if TYPE_CHECKING:
    from fdl.system.survey import Survey

app = group("setup")


@app.command()
def setup(
    ctx: typer.Context,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            "--non-interactive",
            help="Do it without asking (--non-interactive: floDl's name for it).",
        ),
    ] = False,
    torch: TorchOption = None,
    from_wheel: Annotated[
        bool,
        typer.Option("--from-wheel", help="Install from the PyPI wheel, not download.pytorch.org."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Plan afresh even if the active variant fits.")
    ] = False,
    dry_run: ShowPlanOption = False,
    as_json: JsonOption = False,
) -> None:
    """Detect the GPUs, say which libtorch fits (official build, wheel, or source build),
    install and activate it.

    Example: fdl setup --yes
    """
    session: Session = ctx.obj
    context = session.libtorch_context()
    settings = session.libtorch_settings()
    found, report = _gpus(session)
    amd = tuple(d.arch for d in found.devices if d.vendor == "amd")
    wanted = settings.torch_for(torch)
    if wanted is None:  # fdl picks the newest release: say when PyPI has a newer one
        from fdl.cli._learn import pypi_url
        from fdl.cli._newer import newer_release_note

        newer_release_note(session.console, session.environ, pypi=pypi_url(session.environ))
    plan = plan_setup(
        context,
        report.capabilities,
        driver=report.driver,
        torch=wanted,
        preferred=settings.variant,
        preferred_origin=settings.variant_origin,
        from_wheel=from_wheel,
        force=force,
        platform=_platform(),
        amd=amd,
    )
    plan = choose_setup(plan, _facts(session, plan, report))
    if not as_json:
        lines = _machine_lines(context, report, found)
        if settings.framework.why and not torch:
            lines.append(f"torch {settings.torch}: {settings.framework.why}")
        session.console.out("\n".join([*lines, "", *_plan_lines(plan)]))
    outcome = _carry_out(session, context, plan, yes=yes, dry_run=dry_run, quiet=as_json)
    if as_json:
        framework = settings.framework.to_json()
        choice = (plan.choice or Choice(())).to_json()  # keep, activate: no source
        session.console.json(
            {"plan": plan.to_json(), "framework": framework, "choice": choice, **outcome}
        )


def _facts(session: Session, plan: SetupPlan, report: GpuReport) -> Facts:
    """What the chooser reads beyond the plan, gathered where it asks (the team's registry,
    the torch installed for the user's Python)."""
    import sys

    from fdl.cli.commands._team import look_up, team_registry
    from fdl.libtorch import gather_facts
    from fdl.libtorch.sources import installed_torch
    from fdl.runner import default_runner

    if plan.need is None:  # keep, activate
        return Facts()
    registry = team_registry(session)
    torch = plan.selection.torch_version
    return gather_facts(
        plan.need,
        registry=registry,
        look_up=lambda: look_up(
            session, registry or "", torch=torch, gpus=report.capabilities, driver=report.driver
        ),
        installed=lambda: installed_torch(session.environ, default_runner(), own=sys.executable),
    )


def _gpus(session: Session) -> tuple[Survey, GpuReport]:
    """Every vendor's GPUs, and the NVIDIA report the planners read (both from
    ``FLODL_TESTING_GPU_JSON`` when it is set, as in floDl)."""
    from fdl.system.survey import SPOOF_ENV, nvidia_report, survey

    if session.environ.get(SPOOF_ENV, "").strip():
        found = survey(session.environ)
        return found, nvidia_report(found)
    report = detect_gpus()
    return survey(session.environ, nvidia=report), report


def _machine_lines(context: Context, report: GpuReport, found: Survey) -> list[str]:
    lines = [f"libtorch root: {context.label()}"]
    if not context.project:  # the README's order is init, then setup in the project
        lines.append(
            "  (outside a project: a project reads its own libtorch/, not this one; run "
            "fdl setup in it, or take a variant from here with fdl libtorch install "
            f"--from-dir {context.libtorch_dir}/NAME)"
        )
    amd = [d for d in found.devices if d.vendor == "amd"]
    if not report.gpus and not amd:
        lines.append(f"GPUs: none ({report.reason or 'no NVIDIA GPU'}): the CPU build")
    for gpu in report.gpus:
        cap = gpu.capability.label() if gpu.capability else "capability unknown"
        if gpu.capability and report.driver:
            check = check_gpu_driver(report.driver, [gpu.capability])
            cap += "" if check.ok else f": NOT SUPPORTED by driver {report.driver}: {check.fix}"
        lines.append(f"GPU {gpu.index}: {gpu.name}, {cap}")
    if report.driver:
        lines.append(f"NVIDIA driver {report.driver}")
    for device in amd:
        lines.append(f"GPU {device.index} (AMD): {printable(device.name)}, {device.arch}")
    lines += [f"note: {printable(n.message, limit=2000)}" for n in found.notes]
    return lines


def _plan_lines(plan: SetupPlan) -> list[str]:
    lines = [f"plan: {plan.action}: {plan.reason}"]
    if plan.command:
        lines.append(f"  command:  {plan.command_line}")
    if plan.action not in ("keep", "activate"):
        lines += render_selection(plan.selection)
    lines += [f"  or:       {a}" for a in plan.alternatives]
    return lines + (plan.choice.lines() if plan.choice else [])


def _carry_out(
    session: Session, context: Context, plan: SetupPlan, *, yes: bool, dry_run: bool, quiet: bool
) -> dict[str, Any]:
    say = session.console.info
    if plan.action == "keep":
        return {"done": "nothing to do"}
    if plan.action == "build":
        say(f"next step (takes hours): {plan.command_line}")
        return {"done": "described", "next": plan.command_line}
    if dry_run:
        say("[dry-run] nothing changed")
        return {"done": "dry-run"}
    if not yes:
        if not session.interactive:
            say("not changing anything without --yes (no terminal to ask)")
            return {"done": "asked for --yes"}
        if not session.confirm(f"{plan.action} now?", default=True):
            return {"done": "declined"}
    if plan.action == "pull":
        return _pull(session, plan, quiet=quiet)
    progress = ProgressLine(session.console, f"{plan.action} {plan.variant or ''}".strip())

    def stage(label: str) -> None:
        progress.label = label

    try:
        done = run_setup(
            plan,
            context,
            cache=cache_dir(session.environ),
            mirror=session.libtorch_settings().mirror,
            on_progress=progress.bytes,
            on_message=progress.message,
            on_line=progress.status,
            on_stage=stage,
        )
    finally:
        progress.close()
    if done.install is None:
        say(f"active variant: {done.variant}")
        return {"done": "activated", "variant": done.variant}
    result = done.install
    if not quiet:
        for line in render_install(result):
            say(line)
    warn_unresolved(session.console, result)
    return {"done": "installed", "variant": result.target.name, "path": str(result.target.path)}


def _pull(session: Session, plan: SetupPlan, *, quiet: bool) -> dict[str, Any]:
    from fdl.cli.commands._team import pull

    result = pull(session, plan.reference or "", name=plan.variant)
    if not quiet:
        for line in render_install(result.install):
            session.console.info(line)
    warn_unresolved(session.console, result.install)
    target = result.install.target
    return {"done": "installed", "variant": target.name, "path": str(target.path)}


def _platform() -> str:
    from fdl.compat import current_platform

    return current_platform()
