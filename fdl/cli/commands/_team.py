"""The team's registry in the commands that install libtorch (setup, install, build, pull)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fdl.cli._progress import ProgressLine, human_bytes
from fdl.errors import NetworkError
from fdl.paths import cache_dir, own_cache_dir

if TYPE_CHECKING:
    from fdl.cli._session import Session
    from fdl.compat import Capability
    from fdl.libtorch import PullResult, SharedMatch

__all__ = ["credentials", "look_up", "pull", "team_registry"]


def credentials(session: Session) -> Any:
    """Registry credentials as docker keeps them (the docker config or its helper)."""
    from fdl.engine import registry_credentials
    from fdl.runner import default_runner

    return lambda host: registry_credentials(host, session.environ, default_runner())


def team_registry(session: Session, given: str | None = None) -> str | None:
    """The team's repository: ``given``, else ``libtorch.registry`` (which
    ``$FDL_LIBTORCH_REGISTRY`` sets), else the variable itself outside a project."""
    from fdl.libtorch import REGISTRY_ENV

    return given or session.libtorch_settings().registry or session.environ.get(REGISTRY_ENV)


def look_up(
    session: Session,
    registry: str,
    *,
    torch: str,
    gpus: Iterable[Capability],
    driver: str | None,
    missing_ok: bool = True,
) -> SharedMatch | None:
    """A variant of the team's registry that fits; None (with a warning) when the registry
    cannot be read, or has no such repository yet (``missing_ok``; else that error): the
    plan then goes on without it."""
    from fdl.compat import current_platform
    from fdl.libtorch import RepositoryNotFound, find_shared

    try:
        return find_shared(
            registry,
            torch=torch,
            gpus=gpus,
            driver=driver,
            platform=current_platform(),
            credentials=credentials(session),
        )
    except NetworkError as exc:
        session.console.warn(f"the team's registry {registry} cannot be read ({exc.message})")
        return None
    except RepositoryNotFound as exc:
        if not missing_ok:
            raise
        session.console.warn(f"{exc.message}; going on without it ({exc.hint})")
        return None


def pull(
    session: Session,
    reference: str,
    *,
    name: str | None = None,
    activate: bool = True,
    force: bool = False,
) -> PullResult:
    """``fdl libtorch pull``, with a progress line."""
    from fdl.libtorch import pull_variant

    progress = ProgressLine(session.console, f"pull {reference}")
    done = [0]

    def on_bytes(count: int) -> None:
        done[0] += count
        progress.bytes(done[0], None)

    try:
        result = pull_variant(
            session.libtorch_context(),
            reference,
            credentials=credentials(session),
            cache=own_cache_dir(cache_dir(session.environ) / "registry") / "blobs",
            name=name,
            activate=activate,
            force=force,
            on_bytes=on_bytes,
            on_line=progress.message,
        )
    finally:
        progress.close()
    if result.resumed:
        session.console.info(f"resumed {human_bytes(result.resumed)} already here")
    return result
