"""``fdl libtorch install``: a variant from a PyTorch wheel or from an existing tree."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fdl.cli._libtorch_actions import context_of, install_json, settings
from fdl.cli._libtorch_render import render_install
from fdl.cli._progress import ProgressLine
from fdl.cli._session import Session
from fdl.errors import UsageError
from fdl.paths import cache_dir

if TYPE_CHECKING:
    from fdl.libtorch import InstallResult

__all__ = ["InstallOptions", "install", "warn_unresolved"]


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


def install(session: Session, options: InstallOptions) -> int:
    """Install a variant from a wheel (file, environment, pip) or adopt a tree."""
    from fdl.libtorch import install_wheel, wheel_source
    from fdl.runner import default_runner

    _check_options(options)
    if options.from_dir is not None:
        return _from_dir(session, options)
    runner = default_runner()
    cache = cache_dir(session.environ) / "wheels"
    progress = ProgressLine(session.console, "install from wheel")
    try:
        source = wheel_source(
            cache=cache,
            runner=runner,
            wheel=options.wheel,
            python=options.python,
            torch=options.torch or settings(session).torch,
            index_url=options.index_url,
            on_message=progress.message,
            on_line=progress.status,
        )
        result = install_wheel(
            context_of(session),
            source,
            cache=cache,
            runner=runner,
            name=options.name,
            force=options.force,
            nvidia=options.nvidia,
            index_url=options.index_url,
            activate=options.activate,
            on_message=progress.message,
            on_line=progress.status,
        )
    finally:
        progress.close()
    _report(session, result, options.as_json)
    warn_unresolved(session, result)
    return 0


def warn_unresolved(session: Session, result: InstallResult) -> None:
    """Warn when a fresh variant's libraries need something it does not contain."""
    from fdl.libtorch import unresolved_libraries

    for check in unresolved_libraries(result):
        session.console.warn(f"{check.message}")
        if check.fix:
            session.console.line(f"  fix: {check.fix}")


def _from_dir(session: Session, options: InstallOptions) -> int:
    from fdl.libtorch import install_dir

    assert options.from_dir is not None
    result = install_dir(
        context_of(session),
        options.from_dir,
        name=options.name,
        force=options.force,
        activate=options.activate,
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
