"""``fdl cache``: what fdl keeps to go faster, its size, and removing it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._progress import human_bytes
from fdl.cli._session import Session
from fdl.cli.commands._common import (
    DryRunOption,
    JsonOption,
    YesOption,
    confirm_delete,
    group,
)
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.engine import Engine
    from fdl.libtorch import CacheEntry

app = group(
    "cache",
    "fdl's caches (downloads, wheels, compiler caches, build trees, libtorch images): "
    "list them with their size, clean them.\n\nExample: fdl cache list",
    no_args_is_help=True,
)


def _entries(
    session: Session, with_images: bool = True, all_projects: bool = False
) -> tuple[list[CacheEntry], Engine | None]:
    from fdl.engine import default_engine
    from fdl.errors import EnvironmentProblem, ManifestError
    from fdl.images import project_name
    from fdl.libtorch import ImageOwner, list_caches

    engine: Engine | None = None
    if with_images:
        try:
            engine = default_engine()
            engine.describe()
        except EnvironmentProblem:
            engine = None  # no docker here: no images to list
    manifest = None
    if with_images and not all_projects:
        try:
            manifest = session.manifest_or_none()
        except ManifestError:
            manifest = None  # a broken manifest: no project, so no project's images
    owner = ImageOwner(
        project_dir=manifest.directory if manifest else None,
        project=project_name(manifest) if manifest else None,
        every_project=all_projects,
    )
    context = session.libtorch_context()
    return list_caches(context, session.environ, engine=engine, owner=owner), engine


AllProjectsOption = Annotated[
    bool,
    typer.Option(
        "--all-projects",
        help="Images: every fdl-libtorch image this user made (all projects, source-build "
        "builders), not only this project's.",
    ),
]


@app.command("list")
def list_(
    ctx: typer.Context, as_json: JsonOption = False, all_projects: AllProjectsOption = False
) -> None:
    """Each cache with where it is, what it holds and how much deleting it frees.

    Example: fdl cache list --json
    """
    session: Session = ctx.obj
    entries, _ = _entries(session, all_projects=all_projects)
    if as_json:
        session.console.json([e.to_json() for e in entries])
        return
    width = max(len(e.name) for e in entries)
    for entry in entries:
        where = str(entry.path) if entry.path else f"{len(entry.images)} images"
        session.console.out(
            f"{entry.name:<{width}}  {human_bytes(entry.size):>10}  {where}  ({entry.description})"
        )
    total = sum(e.size for e in entries)
    session.console.out(f"{'total':<{width}}  {human_bytes(total):>10}")


@app.command()
def clean(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Caches to clean (default: all): downloads, wheels, compiler, ..."),
    ] = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    all_projects: AllProjectsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Delete caches (all, or those named). Only fdl's caches: installed variants and
    your files are never touched, nor images of other users or (without --all-projects)
    other projects. Asks first in a terminal.

    Example: fdl cache clean wheels --dry-run
    """
    from fdl.libtorch import CACHES, check_cleanable, clean_caches

    session: Session = ctx.obj
    wanted = list(names or [])
    unknown = [n for n in wanted if n not in CACHES]
    if unknown:
        raise UsageError(f"no cache called {unknown[0]!r}", hint=f"caches: {', '.join(CACHES)}")
    entries, engine = _entries(
        session, with_images=not wanted or "images" in wanted, all_projects=all_projects
    )
    chosen = [e for e in entries if (not wanted or e.name in wanted) and (e.size or e.images)]
    check_cleanable(chosen)  # before the dry-run too: it refuses what the run would
    total = sum(e.size for e in chosen)
    what = ", ".join(f"{e.name} ({human_bytes(e.size)})" for e in chosen) or "nothing"
    if dry_run or not chosen:
        if as_json:
            session.console.json({"clean": [e.to_json() for e in chosen], "dry_run": dry_run})
        else:
            prefix = "[dry-run] would delete" if dry_run else "nothing to delete:"
            session.console.out(f"{prefix} {what}")
        return
    if not confirm_delete(session, what, "fdl cache clean", wanted, yes=yes):
        return
    removed = clean_caches(chosen, [e.name for e in chosen], engine=engine)
    if as_json:
        session.console.json({"cleaned": [e.to_json() for e in removed], "bytes": total})
    else:
        session.console.info(f"freed {human_bytes(total)}: {what}")
