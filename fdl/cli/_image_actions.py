"""``fdl image`` actions: plan through fdl.images, execute, print text or JSON."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl.cli._progress import ProgressLine, human_bytes, human_duration
from fdl.cli._session import Session
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.engine import Engine
    from fdl.images import BuiltImage, IgnoreFile, ImageSpec, SizeReport

__all__ = ["build", "render", "run", "size"]

_STEP = re.compile(r"^#\d+ \[([^\]]+)\] (.+)$")


def _plan(session: Session, profiles: Sequence[str]) -> list[ImageSpec]:
    from fdl.images import plan_images

    return plan_images(session.manifest(), list(profiles))


def _engine() -> Engine:
    from fdl.engine import default_engine

    return default_engine()


def render(
    session: Session, profiles: Sequence[str], output: Path | None, *, force: bool = False
) -> int:
    """Print the Dockerfile(s), or write them with the compose file into ``output``."""
    from fdl.images import (
        dockerfile_name,
        ensure_dockerignore,
        render_compose,
        render_dockerfile,
        write_generated,
    )

    specs = _plan(session, profiles)
    if output is None:
        texts = [render_dockerfile(spec) for spec in specs]
        if len(specs) == 1:
            session.console.out(texts[0], end="")
        else:
            for spec, text in zip(specs, texts, strict=True):
                session.console.out(f"# ---- {dockerfile_name(spec)} ----")
                session.console.out(text)
        return 0
    project = session.manifest().directory
    output = output if output.is_absolute() else session.cwd / output
    context = os.path.relpath(project, output)
    dockerfiles = os.path.relpath(output, project)
    files = [(output / dockerfile_name(spec), render_dockerfile(spec)) for spec in specs]
    files.append(
        (
            output / "docker-compose.yml",
            render_compose(specs, context=context, dockerfile_dir=dockerfiles),
        )
    )
    for path in write_generated(files, force=force):
        session.console.info(f"wrote {_shown(path, session.cwd)}")
    for directory in dict.fromkeys(spec.context for spec in specs):
        chosen = [spec for spec in specs if spec.context == directory]
        _report_ignore(session, ensure_dockerignore(project / directory, chosen))
    return 0


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


def build(
    session: Session,
    profiles: Sequence[str],
    *,
    tag: str | None,
    no_cache: bool,
    push: bool,
    as_json: bool,
) -> int:
    """Build the profiles' images; print a summary (or JSON with sizes)."""
    from fdl.images import build_images, size_report

    specs = _plan(session, profiles)
    if tag is not None:
        if len(specs) != 1:
            raise UsageError(
                "--tag names one image, and this builds several",
                hint="name one profile: fdl image build train --tag me/train:1",
            )
        specs = [replace(specs[0], tag=tag)]
    project = session.manifest().directory
    engine = _engine()
    progress = _BuildProgress(session)
    try:
        built = build_images(
            specs,
            project,
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
        return 0
    for item, report in zip(built, reports, strict=True):
        result = item.result
        session.console.info(
            f"built {item.spec.tag} ({result.image_id[:19]}) in {human_duration(item.seconds)}: "
            f"{len(result.steps)} steps, {len(result.cached_steps)} from cache"
        )
        session.console.out(_size_line(report))
    return 0


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


def _size_line(report: SizeReport) -> str:
    text = (
        f"{report.image}: {human_bytes(report.size)} = base {human_bytes(report.base_size)} "
        f"+ {human_bytes(report.added)}"
    )
    floor, overhead = report.floor, report.overhead
    if floor is not None:
        text += f"; floor {human_bytes(floor)}"
        if overhead is not None:
            text += f" ({overhead:+.1%} above the base)"
    return text


def size(session: Session, profiles: Sequence[str], *, as_json: bool) -> int:
    """Report the built images' sizes per layer, against the base and the floor."""
    from fdl.images import size_report

    specs = _plan(session, profiles)
    engine = _engine()
    if not profiles:
        specs = [spec for spec in specs if engine.image_exists(spec.tag)]
        if not specs:
            raise UsageError(
                "no image of this project's profiles is built",
                hint="build one first: fdl image build train",
            )
    reports = [size_report(spec, engine=engine) for spec in specs]
    if as_json:
        session.console.json([report.to_json() for report in reports])
        return 0
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
    return 0


def run(session: Session, profile: str, args: Sequence[str]) -> int:
    """Run a training image; return the container's exit code."""
    import sys

    from fdl.images import host_has_gpus, plan_run, prepare_mounts

    spec = _plan(session, [profile])[0]
    if spec.kind != "train":
        raise UsageError(
            f"fdl image run runs training images, and {profile!r} is a {spec.kind} image",
            hint=f"use the compose service instead: docker compose run --rm {profile} <command>",
        )
    engine = _engine()
    if not engine.image_exists(spec.tag):
        raise UsageError(
            f"image {spec.tag} is not built", hint=f"build it first: fdl image build {profile}"
        )
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    plan = plan_run(
        spec,
        session.manifest().directory,
        args,
        gpus_present=host_has_gpus(),
        interactive=interactive,
    )
    prepare_mounts(plan)
    result = engine.run(plan.run, on_line=None if interactive else session.console.out)
    return result.exit_code
