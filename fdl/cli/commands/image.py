"""``fdl image``: Dockerfiles from the manifest's ``images:`` profiles, builds, sizes, runs."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fdl.cli._progress import ProgressLine, human_bytes, human_duration
from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, OverwriteOption, checked_output, group
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.ci import LocalStep
    from fdl.images import BuiltImage, IgnoreFile, SizeReport

app = group(
    "image",
    "Generated Dockerfiles, BuildKit builds, image sizes and runs.\n\n"
    "Example: fdl image build train",
    no_args_is_help=True,
)

_STEP = re.compile(r"^#\d+ \[([^\]]+)\] (.+)$")


@app.command()
def render(
    ctx: typer.Context,
    profile: Annotated[
        str | None, typer.Argument(help="Image profile (default: every profile).")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write <profile>.Dockerfile and docker-compose.yml here."
        ),
    ] = None,
    force: OverwriteOption = False,
) -> None:
    """Print the generated Dockerfile(s), or write them with the compose file.

    With -o, the project's .dockerignore is written too (unless it is your own). Files of
    yours there (a docker-compose.yml fdl did not write) are refused unless --force.

    Example: fdl image render train -o docker/
    """
    from fdl.images import dockerfile_name, plan_images, render_dockerfile, write_image_files

    session: Session = ctx.obj
    manifest = session.manifest()
    specs = plan_images(manifest, [profile] if profile else [])
    if output is None:
        if len(specs) == 1:
            session.console.out(render_dockerfile(specs[0]), end="")
            return
        for spec in specs:
            session.console.out(f"# ---- {dockerfile_name(spec)} ----")
            session.console.out(render_dockerfile(spec))
        return
    target = checked_output(
        output if output.is_absolute() else session.cwd / output, directory=True
    )
    done = write_image_files(specs, manifest.directory, target, force=force)
    for path in done.written:
        session.console.info(f"wrote {_shown(path, session.cwd)}")
    for ignore in done.ignores:
        _report_ignore(session, ignore)


@app.command()
def build(
    ctx: typer.Context,
    profiles: Annotated[
        list[str] | None, typer.Argument(help="Image profiles (default: every profile).")
    ] = None,
    tag: Annotated[
        str | None, typer.Option("--tag", "-t", help="Image name (one profile only).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Build every step again.")] = False,
    push: Annotated[bool, typer.Option("--push", help="Push the images when built.")] = False,
    all_cells: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Build the ci: matrix (every profile x variant, as CI does), in dependency order.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build images with BuildKit; report their size against the smallest possible.

    Example: fdl image build train --tag registry.example.com/me/train:1 --push
    """
    from fdl.engine import default_engine
    from fdl.images import build_images, plan_images, size_report

    session: Session = ctx.obj
    if all_cells:
        if profiles or tag is not None:
            raise UsageError(
                "--all builds the whole ci: matrix, with the tags of its tag scheme",
                hint="drop the profile names and --tag (or build one profile without --all)",
            )
        _build_matrix(session, no_cache=no_cache, push=push, as_json=as_json)
        return
    specs = plan_images(session.manifest(), profiles or [])
    if tag is not None:
        if len(specs) != 1:
            raise UsageError(
                "--tag names one image, and this builds several",
                hint="name one profile: fdl image build train --tag me/train:1",
            )
        specs = [replace(specs[0], tag=tag)]
    engine = default_engine()
    progress = _BuildProgress(session)
    try:
        built = build_images(
            specs,
            session.manifest().directory,
            engine=engine,
            no_cache=no_cache,
            push=push,
            environ=session.environ,
            on_status=progress.status,
            on_line=progress.output,
            on_ignore=lambda ignore: _report_ignore(session, ignore),
        )
    finally:
        progress.line.close()
    reports = [size_report(item.spec, engine=engine) for item in built]
    if as_json:
        session.console.json([_built_json(b, r) for b, r in zip(built, reports, strict=True)])
        return
    for item, report in zip(built, reports, strict=True):
        result = item.result
        session.console.info(
            f"built {item.spec.tag} ({result.image_id[:19]}) in {human_duration(item.seconds)}: "
            f"{len(result.steps)} steps, {len(result.cached_steps)} from cache"
        )
        session.console.out(_size_line(report))


@app.command()
def size(
    ctx: typer.Context,
    profile: Annotated[
        str | None, typer.Argument(help="Image profile (default: every built one).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a built image's size per layer, its base, and its floor (base + program +
    the libraries it loads).

    Example: fdl image size train
    """
    from fdl.engine import default_engine
    from fdl.images import plan_images, size_report

    session: Session = ctx.obj
    specs = plan_images(session.manifest(), [profile] if profile else [])
    engine = default_engine()
    if not profile:
        specs = [spec for spec in specs if engine.image_exists(spec.tag)]
        if not specs:
            raise UsageError(
                "no image of this project's profiles is built",
                hint="build one first: fdl image build train",
            )
    reports = [size_report(spec, engine=engine) for spec in specs]
    if as_json:
        session.console.json([report.to_json() for report in reports])
        return
    for report in reports:
        session.console.out(_size_line(report))
        for layer in report.layers:
            if layer.in_base or not layer.size:
                continue
            step = " ".join(layer.created_by.split())
            step = step if len(step) <= 70 else step[:67] + "..."
            session.console.out(f"  {human_bytes(layer.size):>10}  {step}")
        if report.closure:
            session.console.out(f"  closure ({len(report.closure)} files):")
            for path, count in sorted(report.closure, key=lambda item: -item[1]):
                session.console.out(f"  {human_bytes(count):>10}  {path}")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    ctx: typer.Context,
    profile: Annotated[str, typer.Argument(help="A training image profile.")],
    args: Annotated[
        list[str] | None, typer.Argument(help="Arguments for the program (after --).")
    ] = None,
) -> None:
    """Run a training image with the project's directories mounted as declared
    (GPUs passed through when the host has them).

    Example: fdl image run train -- --steps 100
    """
    from fdl.engine import default_engine
    from fdl.images import host_has_gpus, plan_images, plan_run, prepare_mounts, stale_image

    session: Session = ctx.obj
    spec = plan_images(session.manifest(), [profile])[0]
    if spec.kind != "train":
        raise UsageError(
            f"fdl image run runs training images, and {profile!r} is a {spec.kind} image",
            hint=f"use the compose service instead: docker compose run --rm {profile} <command>",
        )
    engine = default_engine()
    env = f"--env {session.env} " if session.env else ""
    build = f"fdl {env}image build {profile}"
    if not engine.image_exists(spec.tag):
        raise UsageError(f"image {spec.tag} is not built", hint=f"build it first: {build}")
    stale = stale_image(spec, engine.inspect_image(spec.tag).labels)
    if stale is not None:
        raise UsageError(stale, hint=f"build it from this manifest first: {build}")
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    plan = plan_run(
        spec,
        session.manifest().directory,
        args or [],
        gpus_present=host_has_gpus(),
        interactive=interactive,
    )
    prepare_mounts(plan)
    result = engine.run(plan.run, on_line=None if interactive else session.console.out)
    raise typer.Exit(result.exit_code)


def _build_matrix(session: Session, *, no_cache: bool, push: bool, as_json: bool) -> None:
    """``--all``: every cell of the ci: matrix, each variant's libtorch image first."""
    from fdl.ci import bake_path, build_matrix, plan_matrix
    from fdl.engine import default_engine

    matrix = plan_matrix(session.manifest(), env=session.env)
    progress = _BuildProgress(session)
    try:
        built = build_matrix(
            matrix,
            session.manifest().directory,
            engine=default_engine(),
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
        return
    for step in built.steps:
        what = "libtorch image" if step.kind == "libtorch" else "cell"
        took = f" in {human_duration(step.seconds)}" if step.seconds >= 0.05 else ""
        pushed = ", pushed" if step.pushed else ""
        session.console.out(f"{what} {step.name}: {step.image}{took}{pushed}")


class _BuildProgress:
    """Shows the current build step on one line; every line with -vv."""

    def __init__(self, session: Session) -> None:
        self.console = session.console
        self.line = ProgressLine(session.console, "image")

    def status(self, text: str) -> None:
        self.line.message(text)

    def output(self, text: str) -> None:
        self.console.debug(text)
        found = _STEP.match(text.strip())
        if found is not None:
            stage, step = found.groups()
            self.line.status(f"[{stage}] {step}")


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _report_ignore(session: Session, ignore: IgnoreFile) -> None:
    if ignore.action in ("written", "updated"):
        session.console.info(f"{ignore.action} {_shown(ignore.path, session.cwd)}")
    elif ignore.action == "user" and ignore.missing:
        session.console.warn(
            f"{_shown(ignore.path, session.cwd)} is yours (no fdl header) and does not exclude "
            f"{', '.join(ignore.missing)}: they would be sent to the docker daemon"
        )


def _built_json(item: BuiltImage, report: SizeReport) -> dict[str, Any]:
    result = item.result
    return {
        "profile": item.spec.profile,
        "kind": item.spec.kind,
        "tag": item.spec.tag,
        "id": result.image_id,
        "builder": result.builder.value,
        "seconds": round(item.seconds, 1),
        "libtorch_image": item.libtorch_image,
        "pushed": item.pushed,
        "steps": [
            {"name": step.name, "cached": step.cached, "stage": step.stage} for step in result.steps
        ],
        "size": report.to_json(),
    }


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


def _size_line(report: SizeReport) -> str:
    text = (
        f"{report.image}: {human_bytes(report.size)} = base {human_bytes(report.base_size)} "
        f"+ {human_bytes(report.added)}"
    )
    floor, overhead = report.floor, report.overhead
    if floor is not None:
        # The overhead compares what the image adds to the base with what the floor
        # (the program and the libraries it loads) adds: it is above the floor.
        above = report.size - floor
        sign = "-" if above < 0 else "+"
        text += f"; floor {human_bytes(floor)}"
        if report.packages:
            text += f" (packages: {human_bytes(report.packages)})"
        text += f", {sign}{human_bytes(abs(above))} above the floor"
        if overhead is not None:
            text += f" ({overhead:+.1%} on the floor's {human_bytes(floor - report.base_size)})"
    return text
