"""The training images that benchmark sides run in: built (BuildKit reuses what is
current) before the first round, and described in the run's environment record."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fdl.bench._plan import Benchmark

__all__ = ["image_profiles", "prepare_images"]


def image_profiles(benches: Sequence[Benchmark]) -> list[str]:
    """The image profiles the sides of ``benches`` run in, in first-use order."""
    seen: list[str] = []
    for bench in benches:
        for side in bench.sides:
            if side.image and side.image not in seen:
                seen.append(side.image)
    return seen


def prepare_images(
    manifest: Any,
    profiles: Sequence[str],
    *,
    environ: Mapping[str, str],
    on_status: Callable[[str], None] = lambda _: None,
    engine: Any = None,
) -> dict[str, dict[str, Any]]:
    """Build ``profiles`` (what is current comes from the build cache) and describe each:
    its tag, image id (what every round ran), libtorch variant and CUDA.

    Raises:
        ManifestError: a profile ``images:`` does not declare, or one that is not a
            training image.
        EnvironmentProblem, CommandFailed: no engine, or the build failed.
    """
    from fdl.engine import default_engine
    from fdl.errors import ManifestError
    from fdl.images import build_images, plan_images

    if not profiles:
        return {}
    specs = plan_images(manifest, list(profiles))
    for spec in specs:
        if spec.kind != "train":
            raise ManifestError(
                f"bench: image {spec.profile!r} is a {spec.kind} image, not a training image",
                hint="name a profile of kind train (it runs its program with the round's args)",
            )
    chosen = engine or default_engine()
    built = build_images(
        specs, Path(manifest.directory), engine=chosen, environ=environ, on_status=on_status
    )
    described: dict[str, dict[str, Any]] = {}
    for item in built:
        variant = item.spec.variant
        described[item.spec.profile] = {
            "tag": item.spec.tag,
            "id": item.result.image_id,
            "variant": variant.name if variant is not None else None,
            "torch": variant.torch if variant is not None else None,
            "cuda": variant.cuda if variant is not None else None,
        }
    return described
