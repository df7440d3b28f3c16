"""``fdl libtorch`` actions, free of typer: bind the session, call the core, render."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl.cli._libtorch_render import (
    render_checks,
    render_info,
    render_install,
    render_plan,
    summary_line,
    variant_json,
)
from fdl.cli._progress import ProgressLine
from fdl.cli._session import Session
from fdl.errors import ExitCode, UsageError
from fdl.libtorch import variants
from fdl.paths import Context, cache_dir

if TYPE_CHECKING:
    from fdl.libtorch import DownloadPlan, InstallResult

__all__ = [
    "DownloadOptions",
    "Settings",
    "activate",
    "context_of",
    "download",
    "info",
    "install_json",
    "list_variants",
    "remove",
    "settings",
    "verify",
]


def context_of(session: Session) -> Context:
    """The libtorch root for this invocation (project directory, else the global home)."""
    return session.libtorch_context()


@dataclass(frozen=True)
class Settings:
    """The manifest's ``libtorch:`` values, with the environment applied."""

    torch: str | None = None
    variant: str | None = None
    mirror: str | None = None
    mirror_origin: str | None = None


def settings(session: Session) -> Settings:
    """``libtorch.torch/variant/mirror`` from the manifest; ``$FDL_LIBTORCH_MIRROR`` wins."""
    from fdl.libtorch import MIRROR_ENV

    manifest = session.manifest_or_none()
    data = (manifest.get("libtorch") or {}) if manifest is not None else {}
    mirror, origin = data.get("mirror"), None
    if mirror and manifest is not None:
        found = manifest.origin("libtorch.mirror")
        origin = str(found.location()) if found is not None else manifest.source
    env_mirror = session.environ.get(MIRROR_ENV)
    if env_mirror:
        mirror, origin = env_mirror, f"${MIRROR_ENV}"
    torch = data.get("torch")
    return Settings(str(torch) if torch else None, data.get("variant"), mirror, origin)


def _installed_or_active(context: Context, name: str | None) -> str:
    if name:
        normalised = variants.validate_name(name)
        if not (context.libtorch_dir / normalised).is_dir():
            installed = ", ".join(variants.list_variants(context)) or "none"
            raise UsageError(
                f"libtorch variant {normalised!r} is not installed under {context.libtorch_dir}",
                hint=f"installed variants: {installed}",
            )
        return normalised
    active = variants.active_name(context)
    if active is None:
        raise UsageError(
            f"no active libtorch variant in {context.label()}",
            hint="name one (fdl libtorch list), or install one: fdl setup / fdl libtorch download",
        )
    return active


def list_variants(session: Session, *, as_json: bool) -> int:
    """``fdl libtorch list``."""
    context = context_of(session)
    names = variants.list_variants(context)
    active = variants.active_name(context)
    if as_json:
        session.console.json(
            [
                variant_json(
                    n,
                    variants.read_info(context.libtorch_dir / n, n),
                    n == active,
                    str(context.libtorch_dir / n),
                )
                for n in names
            ]
        )
        return 0
    if not names:
        session.console.info(f"No libtorch variants installed in {context.label()}.")
        session.console.info("Run: fdl setup   (or: fdl libtorch download)")
        return 0
    for name in names:
        info = variants.read_info(context.libtorch_dir / name, name)
        what = f"torch {info.torch or '?'}, " + (f"CUDA {info.cuda}" if info.cuda else "CPU")
        mark = "*" if name == active else " "
        session.console.out(f"{mark} {name:<28} {what}{'  (active)' if name == active else ''}")
    return 0


def info(session: Session, name: str | None, *, as_json: bool) -> int:
    """``fdl libtorch info [VARIANT]``."""
    context = context_of(session)
    chosen = _installed_or_active(context, name)
    path = context.libtorch_dir / chosen
    data = variants.read_info(path, chosen)
    active = variants.active_name(context) == chosen
    if as_json:
        session.console.json(variant_json(chosen, data, active, str(path)))
    else:
        session.console.out(render_info(chosen, data, active, str(path)), end="")
    return 0


def activate(session: Session, name: str, *, as_json: bool) -> int:
    """``fdl libtorch activate VARIANT``."""
    context = context_of(session)
    chosen = variants.activate(context, name)
    if as_json:
        session.console.json({"active": chosen, "root": str(context.root)})
    else:
        session.console.info(f"active variant: {chosen} ({context.label()})")
    return 0


def remove(session: Session, name: str, *, as_json: bool) -> int:
    """``fdl libtorch remove VARIANT`` (under the variant's lock)."""
    normalised = variants.validate_name(name)
    was_active = variants.remove(context_of(session), normalised, on_wait=session.console.info)
    if as_json:
        session.console.json({"removed": normalised, "was_active": was_active})
        return 0
    session.console.info(f"removed {normalised}")
    if was_active:
        session.console.info("it was the active variant: no variant is active now")
        session.console.info("set one with: fdl libtorch activate <variant>")
    return 0


@dataclass(frozen=True)
class DownloadOptions:
    """What ``fdl libtorch download`` was asked."""

    cpu: bool = False
    cuda: str | None = None
    torch: str | None = None
    path: Path | None = None
    name: str | None = None
    mirror: str | None = None
    activate: bool = True
    dry_run: bool = False
    force: bool = False
    keep_archive: bool = False
    as_json: bool = False


def plan(session: Session, options: DownloadOptions) -> tuple[Context, DownloadPlan]:
    """The download plan for these options, this machine's GPUs and the manifest."""
    from fdl.libtorch import plan_download, select_variant
    from fdl.system import detect_gpus

    context = context_of(session)
    config = settings(session)
    report = detect_gpus()
    selection = select_variant(
        report.capabilities,
        cpu=options.cpu,
        cuda=options.cuda,
        torch=options.torch or config.torch,
        preferred=None if (options.cpu or options.cuda) else config.variant,
        driver=report.driver,
    )
    mirror = options.mirror or config.mirror
    return context, plan_download(
        selection,
        context,
        cache_dir(session.environ),
        name=options.name,
        path=options.path,
        mirror=mirror,
        activate=options.activate,
    )


def download(session: Session, options: DownloadOptions) -> int:
    """``fdl libtorch download``: plan, then (unless --dry-run) download and install."""
    from fdl.libtorch import run_download

    context, chosen = plan(session, options)
    console = session.console
    if options.dry_run:
        if options.as_json:
            console.json({**chosen.to_json(), "dry_run": True})
        else:
            console.out(render_plan(chosen, dry_run=True), end="")
        return 0
    for line in render_plan(chosen, dry_run=False).splitlines():
        console.info(line)
    progress = ProgressLine(console, f"downloading {chosen.label}")
    try:
        result = run_download(
            chosen,
            context,
            force=options.force,
            keep_archive=options.keep_archive,
            on_progress=progress.bytes,
            on_message=progress.message,
        )
    finally:
        progress.close()
    if options.as_json:
        console.json(install_json(result))
    else:
        for line in render_install(result):
            console.info(line)
    return 0


def install_json(result: InstallResult) -> dict[str, Any]:
    """An install's outcome for ``--json``: where, whether new, whether active, metadata."""
    return {
        "variant": result.target.name,
        "path": str(result.target.path),
        "installed": result.installed,
        "activated": result.activated,
        "replaced": result.replaced,
        **result.info.to_json(),
    }


def verify(
    session: Session,
    name: str | None,
    *,
    path: Path | None,
    cmake: bool,
    keep: bool,
    as_json: bool,
) -> int:
    """``fdl libtorch verify``: exit 1 when a check finds an error."""
    import shutil

    from fdl.libtorch import smoke_runner, verify_variant
    from fdl.runner import default_runner
    from fdl.system import detect_gpus

    context = context_of(session)
    if path is not None:
        chosen, directory = path.name, path.expanduser().absolute()
        if not (directory / "lib").is_dir():
            raise UsageError(
                f"{directory} is not a libtorch tree (no lib/)", hint="pass a variant directory"
            )
    else:
        chosen = _installed_or_active(context, name)
        directory = context.libtorch_dir / chosen
    progress = ProgressLine(session.console, f"verify {chosen}")
    smoke = None
    work_dir = cache_dir(session.environ) / "smoke" / chosen.replace("/", "-")
    if cmake:
        smoke = smoke_runner(
            directory,
            work_dir,
            runner=default_runner(),
            environ=session.environ,
            on_line=progress.status,
        )
    try:
        report = verify_variant(directory, chosen, gpus=detect_gpus(), smoke=smoke)
    finally:
        progress.close()
    if report.smoke is not None and report.smoke.ok and not keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    if as_json:
        session.console.json(report.to_json())
    else:
        session.console.out(f"libtorch variant {chosen} ({directory})\n")
        session.console.out(render_checks(session.console, report.checks), end="")
        session.console.out(f"\n{summary_line(report.checks)}")
    return 0 if report.ok else int(ExitCode.FAILURE)
