"""``fdl setup`` and ``fdl diagnose`` actions, free of typer."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from fdl.cli._libtorch_actions import context_of, settings
from fdl.cli._libtorch_render import render_checks, render_install, render_selection, summary_line
from fdl.cli._progress import ProgressLine
from fdl.cli._session import Session
from fdl.errors import ExitCode, ManifestError
from fdl.paths import Context, cache_dir

if TYPE_CHECKING:
    from fdl.libtorch import SetupPlan
    from fdl.system import GpuReport

__all__ = ["diagnose", "setup"]


def diagnose(session: Session, *, as_json: bool, strict: bool, docker: bool) -> int:
    """``fdl diagnose``: exit 1 with --strict when any check is an error."""
    from fdl.diagnose import Check, Severity
    from fdl.diagnose.checks import run_diagnose

    context = context_of(session)
    extra: list[Check] = []
    expected = None
    try:
        expected = settings(session).variant
    except ManifestError as exc:
        extra.append(Check("manifest", "fdl.yml", Severity.ERROR, str(exc), exc.hint))
    result = run_diagnose(
        context, environ=session.environ, expected_variant=expected, docker=docker
    )
    checks = [*extra, *result.checks]
    if as_json:
        data = result.to_json()
        data["checks"] = [c.to_json() for c in checks]
        session.console.json(data)
    else:
        session.console.out(f"fdl diagnose: {context.label()}\n")
        session.console.out(render_checks(session.console, checks), end="")
        session.console.out(f"\n{summary_line(checks)}")
    failed = any(c.severity is Severity.ERROR for c in checks)
    return int(ExitCode.FAILURE) if strict and failed else 0


def _machine_lines(context: Context, report: GpuReport) -> list[str]:
    lines = [f"libtorch root: {context.label()}"]
    if not report.gpus:
        lines.append(f"GPUs: none ({report.reason or 'no NVIDIA GPU'}): the CPU build")
    for gpu in report.gpus:
        cap = gpu.capability.label() if gpu.capability else "capability unknown"
        lines.append(f"GPU {gpu.index}: {gpu.name}, {cap}")
    if report.driver:
        lines.append(f"NVIDIA driver {report.driver}")
    return lines


def _plan_lines(plan: SetupPlan) -> list[str]:
    lines = [f"plan: {plan.action}: {plan.reason}"]
    if plan.command:
        lines.append(f"  command:  {' '.join(plan.command)}")
    if plan.action not in ("keep", "activate"):
        lines += render_selection(plan.selection)
    lines += [f"  or:       {a}" for a in plan.alternatives]
    return lines


def _confirm(session: Session, question: str) -> bool:
    session.console.stderr.write(f"{question} [Y/n] ")
    session.console.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("", "y", "yes")


def setup(
    session: Session,
    *,
    yes: bool,
    torch: str | None,
    from_wheel: bool,
    force: bool,
    dry_run: bool,
    as_json: bool,
) -> int:
    """Detect, plan, confirm (unless --yes), install and activate."""
    from fdl.libtorch import plan_setup
    from fdl.system import detect_gpus

    console = session.console
    context = context_of(session)
    config = settings(session)
    report = detect_gpus()
    plan = plan_setup(
        context,
        report.capabilities,
        driver=report.driver,
        torch=torch or config.torch,
        preferred=config.variant,
        from_wheel=from_wheel,
        force=force,
    )
    if not as_json:
        console.out("\n".join([*_machine_lines(context, report), "", *_plan_lines(plan)]))
    outcome = _carry_out(session, context, plan, yes=yes, dry_run=dry_run, quiet=as_json)
    if as_json:
        console.json({"plan": plan.to_json(), **outcome})
    return 0


def _carry_out(
    session: Session, context: Context, plan: SetupPlan, *, yes: bool, dry_run: bool, quiet: bool
) -> dict[str, Any]:
    say = session.console.info
    if plan.action == "keep":
        return {"done": "nothing to do"}
    if plan.action == "build":
        say(f"next step (takes hours): {' '.join(plan.command)}")
        return {"done": "described", "next": " ".join(plan.command)}
    if dry_run:
        say("[dry-run] nothing changed")
        return {"done": "dry-run"}
    if not yes:
        if not session.interactive:
            say("not changing anything without --yes (no terminal to ask)")
            return {"done": "asked for --yes"}
        if not _confirm(session, f"{plan.action} now?"):
            return {"done": "declined"}
    from fdl.cli._libtorch_install import warn_unresolved
    from fdl.libtorch import run_setup

    progress = ProgressLine(session.console, f"{plan.action} {plan.variant or ''}".strip())

    def stage(label: str) -> None:
        progress.label = label

    try:
        done = run_setup(
            plan,
            context,
            cache=cache_dir(session.environ),
            mirror=settings(session).mirror,
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
    warn_unresolved(session, result)
    return {"done": "installed", "variant": result.target.name, "path": str(result.target.path)}
