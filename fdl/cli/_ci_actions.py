"""``fdl ci`` actions: plan the matrix through fdl.ci, write or check the files, print."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fdl.cli._session import Session
from fdl.errors import FdlError

if TYPE_CHECKING:
    from fdl.ci import GeneratedFile, Matrix

__all__ = ["check", "generate", "matrix", "plan"]

_LISTED = 8  # files named in the error (the diff above has them all)


def plan(session: Session) -> Matrix:
    """The matrix of the session's manifest."""
    from fdl.ci import plan_matrix

    return plan_matrix(session.manifest(), env=session.env)


def _files(session: Session, output: Path | None) -> tuple[Matrix, Path, list[GeneratedFile]]:
    """The matrix, the root the files go under, and the files."""
    from fdl.ci import generated_files, repository_root

    planned = plan(session)
    if output is not None:
        root = output if output.is_absolute() else session.cwd / output
    else:
        root = repository_root(session.manifest().directory)
    return planned, root, generated_files(planned)


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def matrix(session: Session, *, as_json: bool) -> int:
    """Print the resolved matrix: variants (with how CI installs them), then cells."""
    planned = plan(session)
    if as_json:
        session.console.json(planned.to_json())
        return 0
    out = session.console.out
    config = planned.config
    where = config.registry or "nowhere (no ci.registry: images stay local)"
    out(f"matrix of {config.project}: {len(planned.cells)} cells, pushed to {where}")
    out("")
    out("libtorch variants (each one's image is built before its cells):")
    for variant in planned.variants:
        cuda = f"CUDA {variant.cuda}" if variant.cuda else "CPU"
        out(f"  {variant.key:<24} {variant.name} (torch {variant.torch}, {cuda})")
        out(f"  {'':<24} install: {' '.join(variant.install)}")
        if variant.cache_key:
            out(f"  {'':<24} cached as {variant.cache_key}")
    out("")
    out("cells (profile x variant):")
    for cell in planned.cells:
        out(f"  {cell.id:<24} {cell.tag}")
        for name, value in cell.args:
            out(f"  {'':<24}   --build-arg {name}={value}")
        if cell.needs:
            out(f"  {'':<24}   needs {', '.join(cell.needs)}")
        if cell.cache_from:
            out(f"  {'':<24}   cache {', '.join(cell.cache_from)}")
        test = " ".join(cell.test) if cell.test is not None else None
        if test is not None:
            out(f"  {'':<24}   test: docker run --rm {cell.tag} {test}".rstrip())
    return 0


def generate(session: Session, output: Path | None, *, force: bool = False) -> int:
    """Write the bake file, the Dockerfiles and the workflow (only what changed)."""
    from fdl.ci import dockerfiles_dir, write_files

    planned, root, files = _files(session, output)
    changes = write_files(root, files, [dockerfiles_dir(planned)], force=force)
    for change in changes:
        verb = {"missing": "wrote", "changed": "updated", "stale": "removed"}[change.state]
        session.console.info(f"{verb} {_shown(root / change.path, session.cwd)}")
    unchanged = len(files) - sum(1 for change in changes if change.state != "stale")
    if unchanged:
        session.console.info(f"{unchanged} files unchanged")
    return 0


def check(session: Session, output: Path | None) -> int:
    """Exit 1 with a diff when the files on disk are not what the manifest makes now."""
    from fdl.ci import dockerfiles_dir, find_drift

    planned, root, files = _files(session, output)
    drift = find_drift(root, files, [dockerfiles_dir(planned)])
    if drift.ok:
        session.console.info(f"the {drift.checked} generated files match {planned.config.source}")
        return 0
    session.console.out(drift.diff, end="")
    counts: dict[str, int] = {}
    for change in drift.changes:
        counts[change.state] = counts.get(change.state, 0) + 1
    summary = ", ".join(f"{count} {state}" for state, count in counts.items())
    shown = [change.path for change in drift.changes[:_LISTED]]
    more = len(drift.changes) - len(shown)
    raise FdlError(
        f"{len(drift.changes)} generated files differ from what {planned.config.source} "
        f"makes now ({summary})",
        hint=f"run `{planned.config.command}` and commit the result",
        details="\n".join(shown + ([f"... and {more} more"] if more > 0 else [])),
    )
