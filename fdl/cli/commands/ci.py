"""``fdl ci``: the image matrix (profiles x libtorch variants) as generated CI files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.ci import (
    GeneratedFile,
    Matrix,
    dockerfiles_dir,
    find_drift,
    generated_files,
    plan_matrix,
    repository_root,
    write_files,
)
from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, OverwriteOption, checked_output, group
from fdl.errors import FdlError

app = group(
    "ci",
    "The image matrix of the manifest's ci: section: a bake file and a GitHub "
    "Actions workflow, kept current by a drift check.\n\nExample: fdl ci generate",
    no_args_is_help=True,
)

OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Use this directory instead of the repository root (same layout below it).",
    ),
]


@app.command()
def matrix(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the resolved build matrix: each variant and how CI installs it, each cell
    (profile x variant) with its tag, build arguments, dependencies, cache and test.

    Example: fdl ci matrix --json
    """
    raise typer.Exit(_matrix(ctx.obj, as_json=as_json))


@app.command()
def pushed(
    ctx: typer.Context,
    registry: Annotated[
        str | None,
        typer.Option(
            "--registry",
            metavar="REPO",
            help="The team's repository of variants (default: libtorch.registry).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Look in the team's registry for pushed variants that can stand in for the matrix's
    (same torch and CUDA, runs on every arch planned, the images' platform) and print them
    as ci.pushed entries to put in fdl.yml; reads tags and manifests, never a layer.

    Example: fdl ci pushed --registry registry.example.com/team/libtorch
    """
    raise typer.Exit(_pushed(ctx.obj, registry, as_json=as_json))


@app.command()
def generate(
    ctx: typer.Context,
    output: OutputOption = None,
    force: OverwriteOption = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="List what would be written and deleted; touch nothing."),
    ] = False,
) -> None:
    """Write docker-bake.hcl, a Dockerfile per cell and per libtorch image, and the
    GitHub Actions workflow (only files that changed; stale generated Dockerfiles are
    removed; a file of yours at a generated path is refused unless --force).

    Example: fdl ci generate --dry-run
    """
    raise typer.Exit(_generate(ctx.obj, output, force=force, dry_run=dry_run))


@app.command()
def check(ctx: typer.Context, output: OutputOption = None) -> None:
    """Exit 1, with a diff, when the generated files differ from what the manifest
    makes now (a missing, changed or stale file). Run it in CI.

    Example: fdl ci check
    """
    raise typer.Exit(_check(ctx.obj, output))


_LISTED = 8  # files named in the error (the diff above has them all)


def _files(session: Session, output: Path | None) -> tuple[Matrix, Path, list[GeneratedFile]]:
    """The matrix, the root the files go under, and the files."""
    planned = plan_matrix(session.manifest(), env=session.env)
    if output is not None:
        root = checked_output(
            output if output.is_absolute() else session.cwd / output, directory=True
        )
    else:
        root = repository_root(session.manifest().directory)
    return planned, root, generated_files(planned)


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _matrix(session: Session, *, as_json: bool) -> int:
    """Print the resolved matrix: variants (with how CI installs them), then cells."""
    planned = plan_matrix(session.manifest(), env=session.env)
    if as_json:
        session.console.json(planned.to_json())
        return 0
    out = session.console.out
    config = planned.config
    where = config.registry or "nowhere (no ci.registry: images stay local)"
    out(f"matrix of {config.project}: {len(planned.cells)} cells, pushed to {where}")
    for warning in planned.warnings:
        session.console.warn(warning)
    out("")
    out("libtorch variants (each one's image is built before its cells):")
    for variant in planned.variants:
        cuda = f"CUDA {variant.cuda}" if variant.cuda else "CPU"
        out(f"  {variant.key:<24} {variant.name} (torch {variant.torch}, {cuda})")
        if variant.pushed:
            out(f"  {'':<24} copied from {variant.pushed} (ci.pushed)")
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


def _generate(
    session: Session, output: Path | None, *, force: bool = False, dry_run: bool = False
) -> int:
    """Write the bake file, the Dockerfiles and the workflow (only what changed)."""
    planned, root, files = _files(session, output)
    for warning in planned.warnings:
        session.console.warn(warning)
    changes = write_files(root, files, [dockerfiles_dir(planned)], force=force, dry_run=dry_run)
    verbs = {"missing": "wrote", "changed": "updated", "stale": "removed"}
    if dry_run:
        verbs = {"missing": "would write", "changed": "would update", "stale": "would delete"}
    for change in changes:
        shown = _shown(root / change.path, session.cwd)
        line = f"{verbs[change.state]} {shown}"
        session.console.out(line) if dry_run else session.console.info(line)
    _say_fdl(session, planned)
    for variant in planned.variants:
        if variant.pushed:  # nothing is built or downloaded for it in CI
            session.console.info(f"{variant.key}: copied from {variant.pushed} (ci.pushed)")
    unchanged = len(files) - sum(1 for change in changes if change.state != "stale")
    if unchanged:
        session.console.info(f"{unchanged} files unchanged")
    return 0


def _say_fdl(session: Session, planned: Matrix) -> None:
    """How the workflow installs fdl, and from where that was taken."""
    from fdl.ci import FIX

    install = planned.config.fdl
    if install.problem is None:
        shown = " ".join(install.args)
        session.console.info(
            f"the workflow installs fdl with: pip install {shown} ({install.origin})"
        )
        if not install.origin.startswith("ci.fdl"):
            session.console.info(f"to keep it whoever generates the files, set ci.fdl: {shown}")
        return
    session.console.warn(
        f"the workflow cannot install fdl: ci.fdl is not set, and {install.origin}; its "
        f"`Install fdl` step fails until you {FIX}"
    )


def _pushed(session: Session, given: str | None, *, as_json: bool) -> int:
    """Print the ci.pushed entries the registry allows (the manifest is not changed)."""
    from fdl.ci import find_pushed, pushed_entries
    from fdl.cli.commands._team import credentials, team_registry
    from fdl.errors import UsageError

    planned = plan_matrix(session.manifest(), env=session.env)
    registry = team_registry(session, given)
    if registry is None:
        raise UsageError(
            "no team registry to look in",
            hint="set libtorch.registry in fdl.yml (or FDL_LIBTORCH_REGISTRY), or pass "
            "--registry REPO: fdl ci pushed --registry registry.example.com/team/libtorch",
        )
    found = find_pushed(planned, registry, credentials=credentials(session))
    findings = pushed_entries(planned, found, registry)
    if as_json:
        session.console.json(
            {"registry": registry, "variants": [item.to_json() for item in findings]}
        )
        return 0
    out = session.console.out
    for item in findings:
        out(f"{item.key:<24} {item.reference or '-'}")
        out(f"{'':<24} {item.reason}")
        if item.pinned and item.pinned != item.reference:
            out(f"{'':<24} ci.pushed pins {item.pinned} now")
    usable = [item for item in findings if item.reference]
    if usable:
        out("")
        out("to take them in CI instead of building or downloading, put in fdl.yml:")
        out("ci:")
        out("  pushed:")
        for item in usable:
            out(f"    {item.key}: {item.reference}")
        out("then run: fdl ci generate")
    else:
        session.console.info(f"no pushed variant in {registry} fits the matrix")
    return 0


def _check(session: Session, output: Path | None) -> int:
    """Exit 1 with a diff when the files on disk are not what the manifest makes now."""
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
