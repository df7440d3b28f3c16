"""``fdl libtorch install``: a variant from a PyTorch wheel or from an existing tree."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from fdl.cli._libtorch_actions import context_of, install_json, settings
from fdl.cli._libtorch_render import render_install
from fdl.cli._progress import ProgressLine
from fdl.cli._session import Session
from fdl.errors import UsageError
from fdl.paths import Context, cache_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.libtorch import InstallResult
    from fdl.libtorch._wheel import WheelSource
    from fdl.runner import Runner

__all__ = ["InstallOptions", "install", "install_wheel", "warn_unresolved", "wheel_source"]


@dataclass(frozen=True)
class InstallOptions:
    """What ``fdl libtorch install`` was asked."""

    from_wheel: bool = False
    from_dir: Path | None = None
    wheel: Path | None = None
    python: str | None = None
    torch: str | None = None
    index_url: str | None = None
    name: str | None = None
    nvidia: bool = True
    activate: bool = True
    force: bool = False
    as_json: bool = False


def _check_options(options: InstallOptions) -> None:
    if options.from_dir is None and not options.from_wheel:
        raise UsageError(
            "say where the libtorch comes from: --from-wheel [WHEEL | --python PY | --torch V] "
            "or --from-dir DIR",
            hint="e.g. fdl libtorch install --from-wheel --torch 2.13.0",
        )
    given = [o for o in (options.wheel, options.python, options.torch) if o]
    if options.from_dir is not None and (options.from_wheel or given):
        raise UsageError("--from-dir and --from-wheel are mutually exclusive", hint="pass one")
    if len(given) > 1:
        raise UsageError(
            "give one wheel source: a .whl file, --python or --torch", hint="pass only one of them"
        )


def wheel_source(
    session: Session, options: InstallOptions, runner: Runner, progress: ProgressLine
) -> WheelSource:
    """The wheel to install: a file, a Python environment's torch, or ``pip download``."""
    from fdl.compat import resolve_torch_version
    from fdl.libtorch._wheel import wheel_from_environment, wheel_from_file, wheel_from_pip

    if options.wheel is not None:
        return wheel_from_file(options.wheel.expanduser())
    if options.python is not None:
        return wheel_from_environment(options.python, runner)
    version = options.torch or settings(session).torch
    exact = version if version and version.count(".") >= 2 else resolve_torch_version(version)
    progress.message(f"pip download torch=={exact} --no-deps")
    return wheel_from_pip(
        exact,
        cache_dir(session.environ) / "wheels",
        python=sys.executable,
        runner=runner,
        index_url=options.index_url,
        on_line=progress.status,
    )


def install_wheel(
    session: Session,
    context: Context,
    source: WheelSource,
    options: InstallOptions,
    runner: Runner,
    progress: ProgressLine,
) -> InstallResult:
    """Install ``source`` as ``precompiled/<name or variant>`` (atomically, under the lock)."""
    from fdl.libtorch import install_tree, installed_build_version, resolve_target
    from fdl.libtorch._wheel import NvidiaOptions, populate_from_wheel

    target = resolve_target(context, f"precompiled/{options.name or source.variant}")
    wanted = source.build_version
    found = installed_build_version(target.path) if (target.path / "lib").is_dir() else None
    if found and found != wanted and not options.force:
        raise UsageError(
            f"{target.name} already holds libtorch {found}, not {wanted}",
            hint="replace it with --force, or choose another name with --name",
        )
    nvidia = NvidiaOptions(
        bundle=options.nvidia,
        python=sys.executable,
        cache=cache_dir(session.environ) / "wheels",
        index_url=options.index_url,
    )

    def is_current(path: Path) -> bool:
        return installed_build_version(path) == wanted

    return install_tree(
        context,
        target,
        lambda tree: populate_from_wheel(
            source, tree, runner, nvidia, progress.message, progress.status
        ),
        is_current=None if options.force else is_current,
        activate=options.activate,
        on_wait=progress.message,
        force=options.force,
    )


def install(session: Session, options: InstallOptions) -> int:
    """Install a variant from a wheel (file, environment, pip) or adopt a tree."""
    from fdl.runner import default_runner

    _check_options(options)
    if options.from_dir is not None:
        return _from_dir(session, options)
    runner = default_runner()
    progress = ProgressLine(session.console, "install from wheel")
    try:
        source = wheel_source(session, options, runner, progress)
        result = install_wheel(session, context_of(session), source, options, runner, progress)
    finally:
        progress.close()
    _report(session, result, options.as_json)
    warn_unresolved(session, result)
    return 0


def warn_unresolved(session: Session, result: InstallResult) -> None:
    """Warn when a fresh variant's libraries need something it does not contain."""
    from fdl.diagnose import Severity
    from fdl.libtorch._deps import library_checks

    if not result.installed:
        return
    for check in library_checks(result.target.path, result.info):
        if check.severity is Severity.ERROR:
            session.console.warn(f"{check.message}")
            if check.fix:
                session.console.line(f"  fix: {check.fix}")


def _from_dir(session: Session, options: InstallOptions) -> int:
    from fdl.libtorch import VariantInfo, register_variant, variants

    assert options.from_dir is not None
    tree = options.from_dir.expanduser().absolute()
    if not (tree / "lib").is_dir():
        raise UsageError(
            f"{tree} is not a libtorch tree (no lib/)", hint="pass the libtorch directory"
        )
    name = options.name or tree.name
    full = name if "/" in name else f"precompiled/{name}"
    context = context_of(session)
    existing = variants.variant_dir(context, full)
    in_place = existing.resolve() == tree.resolve()  # adopted where it lies, nothing replaced
    if existing.exists() and not in_place and not options.force:
        raise UsageError(
            f"{variants.validate_name(full)} is already installed",
            hint="replace it with --force, or choose another name with --name",
        )
    info = VariantInfo(name=full, source={"kind": "directory", "directory": str(tree)})
    result = register_variant(
        context,
        full,
        tree,
        info,
        activate=options.activate,
        move=False,
        force=options.force,
        on_wait=session.console.info,
    )
    _report(session, result, options.as_json)
    return 0


def _report(session: Session, result: InstallResult, as_json: bool) -> None:
    if as_json:
        session.console.json(install_json(result))
    else:
        for line in render_install(result):
            session.console.info(line)
