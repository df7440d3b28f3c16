"""``fdl image build --all``: the ci: matrix built here, through fdl.ci."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fdl.cli._progress import human_duration
from fdl.cli._session import Session
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.ci import LocalStep

__all__ = ["build_all"]


def build_all(
    session: Session,
    profiles: Sequence[str],
    *,
    tag: str | None,
    no_cache: bool,
    push: bool,
    as_json: bool,
) -> int:
    """Build every cell of the matrix, each variant's libtorch image first."""
    from fdl.ci import (
        bake_path,
        build_matrix,
        dockerfiles_dir,
        find_drift,
        generated_files,
        repository_root,
    )
    from fdl.cli._ci_actions import plan
    from fdl.cli._image_actions import _BuildProgress
    from fdl.engine import default_engine

    if profiles or tag is not None:
        raise UsageError(
            "--all builds the whole ci: matrix, with the tags of its tag scheme",
            hint="drop the profile names and --tag (or build one profile without --all)",
        )
    matrix = plan(session)
    project = session.manifest().directory
    files = generated_files(matrix)
    # bake only runs the files on disk: they must be what the manifest makes now.
    bake_files = [f for f in files if f.path != matrix.config.workflow]
    root = repository_root(project)
    current = find_drift(root, bake_files, [dockerfiles_dir(matrix)]).ok
    progress = _BuildProgress(session)
    try:
        built = build_matrix(
            matrix,
            project,
            engine=default_engine(),
            bake_current=current,
            no_cache=no_cache,
            push=push,
            environ=session.environ,
            on_status=progress.status,
            on_line=progress.output,
        )
    finally:
        progress.line.close()
    if as_json:
        session.console.json(
            {
                "method": built.method,
                "bake_file": bake_path(matrix) if built.method == "bake" else None,
                "steps": [_step_json(step) for step in built.steps],
            }
        )
        return 0
    for step in built.steps:
        what = "libtorch image" if step.kind == "libtorch" else "cell"
        took = f" in {human_duration(step.seconds)}" if step.seconds >= 0.05 else ""
        pushed = ", pushed" if step.pushed else ""
        session.console.out(f"{what} {step.name}: {step.image}{took}{pushed}")
    return 0


def _step_json(step: LocalStep) -> dict[str, Any]:
    result = step.result
    return {
        "kind": step.kind,
        "name": step.name,
        "image": step.image,
        "seconds": round(step.seconds, 1),
        "id": result.image_id if result is not None else None,
        "cached_steps": len(result.cached_steps) if result is not None else None,
        "pushed": step.pushed,
    }
