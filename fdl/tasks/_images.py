"""Building a compose service's image before a command runs in it, when it is missing.

A service named like a dev or train profile of the manifest's ``images:`` section is
fdl's: its Dockerfile needs BuildKit and, for libtorch in the image, the image fdl
makes of the variant. Left to itself, compose v1 would build it with the classic
builder, which rejects ``RUN --mount``; so fdl builds it the way ``fdl image build``
does. An existing image is used as it is (``fdl image build`` refreshes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fdl.manifest import Manifest
from fdl.tasks._plan import DockerWrap

if TYPE_CHECKING:
    from fdl.engine import Engine, LineCallback

__all__ = ["ensure_service_image"]


def ensure_service_image(
    manifest: Manifest,
    wrap: DockerWrap,
    *,
    engine: Engine | None = None,
    on_status: Callable[[str], None] | None = None,
    on_line: LineCallback | None = None,
) -> str | None:
    """Build the image of the profile behind ``wrap``'s service if it does not exist.

    Args:
        manifest: The root manifest (overlays and ``--set`` applied).
        wrap: The planned docker wrapping.
        engine: The container engine (default: the process-wide one).
        on_status: Receives one line per stage of the build.
        on_line: Receives the build output.

    Returns:
        The tag built, or None when nothing was built (no profile, the service uses
        another image than the profile's, or the image exists).

    Raises:
        UsageError: the profile's libtorch variant is not installed.
        EnvironmentProblem: no engine, or it cannot build with BuildKit.
        CommandFailed: the build failed.
    """
    if wrap.profile is None:
        return None
    from fdl.engine import default_engine
    from fdl.images import build_images, plan_images

    spec = plan_images(manifest, [wrap.profile])[0]
    if wrap.image is not None and wrap.image != spec.tag:
        return None
    chosen = engine or default_engine()
    if chosen.image_exists(spec.tag):
        return None
    if on_status is not None:
        on_status(
            f"image {spec.tag} of service {wrap.service!r} is missing: building it "
            f"(fdl image build {wrap.profile})"
        )
    build_images([spec], manifest.directory, engine=chosen, on_status=on_status, on_line=on_line)
    return spec.tag
