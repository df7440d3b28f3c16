"""``fdl libtorch build``: gather the request, probe, plan, show, run, report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fdl.cli._console import Console
from fdl.cli._session import Session

if TYPE_CHECKING:
    from fdl.libtorch.source import BuildPlan, BuildRequest, BuildResult
    from fdl.manifest import Manifest

__all__ = ["BuildOptions", "build"]


@dataclass
class BuildOptions:
    """The command line of ``fdl libtorch build`` (None: not given)."""

    archs: str | None = None
    cpu: bool = False
    cuda: str | None = None
    torch: str | None = None
    backend: str | None = None
    jobs: int | None = None
    ptx: bool = False
    no_flash_attention: bool = False
    cache: str | None = None
    recipe: str | None = None
    source: Path | None = None
    base_image: str | None = None
    name: str | None = None
    no_activate: bool = False
    fresh: bool = False
    dry_run: bool = False
    as_json: bool = False
    list_recipes: bool = False

    def request(self, cwd: Path) -> BuildRequest:
        """The command-line layer of the request."""
        from fdl.libtorch.source import BuildRequest, Setting

        def given(value: object, flag: str) -> Setting[object] | None:
            return Setting(value, flag) if value is not None else None

        source = (
            self.source if self.source is None or self.source.is_absolute() else cwd / self.source
        )
        return BuildRequest(
            archs=given(self.archs, "--archs"),  # type: ignore[arg-type]
            cpu=given(True if self.cpu else None, "--cpu"),  # type: ignore[arg-type]
            cuda=given(self.cuda, "--cuda"),  # type: ignore[arg-type]
            torch=given(self.torch, "--torch"),  # type: ignore[arg-type]
            backend=given(self.backend, f"--{self.backend}"),  # type: ignore[arg-type]
            jobs=given(self.jobs, "--jobs"),  # type: ignore[arg-type]
            ptx=given(True if self.ptx else None, "--ptx"),  # type: ignore[arg-type]
            flash_attention=given(  # type: ignore[arg-type]
                False if self.no_flash_attention else None, "--no-flash-attention"
            ),
            cache=given(self.cache, "--cache"),  # type: ignore[arg-type]
            recipe=given(self.recipe, "--recipe"),  # type: ignore[arg-type]
            source=given(source, "--source"),  # type: ignore[arg-type]
            base_image=given(self.base_image, "--base-image"),  # type: ignore[arg-type]
            name=given(self.name, "--name"),  # type: ignore[arg-type]
            activate=given(False if self.no_activate else None, "--no-activate"),  # type: ignore[arg-type]
            fresh=given(True if self.fresh else None, "--fresh"),  # type: ignore[arg-type]
        )


def _manifest(session: Session) -> Manifest | None:
    """The merged, validated manifest (``libtorch.build`` included), or None outside a project."""
    return session.manifest_or_none()


def _context_root(session: Session) -> Path:
    return session.libtorch_context().libtorch_dir


def build(session: Session, options: BuildOptions) -> int:
    """Plan (and unless --dry-run, run) a source build; return the exit code."""
    from fdl.libtorch.source import gather_request, plan_build, probe_machine

    console = session.console
    manifest = _manifest(session)
    project_dir = manifest.directory if manifest is not None else None
    if options.list_recipes:
        return _list_recipes(console, project_dir, options.as_json)
    request = gather_request(options.request(session.cwd), manifest, project_dir)
    backend = request.value("backend", "auto")
    facts = probe_machine(
        _context_root(session),
        environ=session.environ,
        docker=backend != "native",
        gpus=request.archs is None and not request.value("cpu", False),
        source=request.source.value if request.source is not None else None,
    )
    plan = plan_build(request, facts)
    if options.dry_run:
        if options.as_json:
            console.json(plan.to_json())
        else:
            console.out(render_plan(plan, dry_run=True), end="")
        return 0
    if not options.as_json:
        console.info(render_plan(plan, dry_run=False).rstrip("\n"))
    result = _execute(session, plan)
    if options.as_json:
        console.json(result.to_json())
    else:
        console.info(render_result(result).rstrip("\n"))
    return 0


def _execute(session: Session, plan: BuildPlan) -> BuildResult:
    from fdl.cli._progress import ProgressLine
    from fdl.libtorch.source import StatusParser, run_build

    console = session.console
    progress = ProgressLine(console, f"building {plan.variant}")
    parser = StatusParser()

    def on_line(line: str) -> None:
        console.debug(line)
        status = parser.feed(line)
        if status is not None:
            progress.status(status.text(), status.fraction)

    try:
        result = run_build(plan, environ=session.environ, on_line=on_line, on_note=progress.message)
    except BaseException:
        progress.close()
        console.info(f"full log: {plan.log_file}; re-run the same command to resume")
        raise
    progress.close(f"built {plan.variant}")
    return result


def _list_recipes(console: Console, project_dir: Path | None, as_json: bool) -> int:
    from fdl.libtorch.source import list_recipes

    recipes = list_recipes(project_dir)
    if as_json:
        console.json(
            [
                {
                    "name": r.name,
                    "description": r.description,
                    "path": str(r.path),
                    "builtin": r.builtin,
                }
                for r in recipes
            ]
        )
        return 0
    width = max((len(r.name) for r in recipes), default=0)
    for recipe in recipes:
        where = "" if recipe.builtin else f"  ({recipe.path})"
        console.out(f"{recipe.name.ljust(width)}  {recipe.description}{where}")
    return 0


def render_plan(plan: BuildPlan, *, dry_run: bool) -> str:
    """The plan for people (``--dry-run`` without ``--json``, and before a real build)."""
    from fdl.libtorch.source import mask

    archs = (
        f"{plan.arch_list}  ({' '.join(plan.archs.codes())})" if plan.archs else "none (CPU build)"
    )
    lines = [
        f"libtorch source build{' (dry run: nothing is run)' if dry_run else ''}",
        f"  variant:   {plan.variant}  ->  {plan.output_dir}",
        f"  torch:     {plan.torch}" + (f"  (recipe {plan.recipe})" if plan.recipe else ""),
        f"  archs:     {archs}",
        f"  toolkit:   {plan.toolkit}",
        f"  backend:   {plan.backend}"
        + (f"  (base image {plan.docker.base_image})" if plan.docker else ""),
        f"  jobs:      {plan.jobs}  ({plan.jobs_reason})",
        f"  cache:     {plan.cache.kind}"
        + (f"  ({plan.cache.remote or plan.cache.directory})" if plan.cache.enabled else ""),
        f"  estimates: ~{plan.disk_gb:.0f} GB disk, ~{plan.memory_gb:.0f} GB RAM",
        f"  log:       {plan.log_file}",
    ]
    for problem in plan.problems:
        lines.append(f"  warning:   {problem.message} (fix: {problem.hint})")
    if dry_run:
        lines.append("  environment:")
        lines += [f"    {k}={v}" for k, v in mask(dict(plan.env)).items()]
        if plan.env_removed:
            lines.append(f"  kept out of the build: {' '.join(plan.env_removed)}")
        lines.append("  commands:")
        for number, command in enumerate(plan.commands, 1):
            when = f"  [{command.when}]" if command.when else ""
            lines.append(f"    {number}. {command.shell()}{when}")
    return "\n".join(lines) + "\n"


def render_result(result: BuildResult) -> str:
    """What was built, what it contains, how long it took."""
    plan = result.plan
    found = " ".join(result.found.codes()) or "no GPU code (CPU build)"
    lines = [
        f"libtorch {plan.torch} ({plan.variant}) built and verified",
        f"  path:      {result.path}",
        f"  archs:     {found}",
        f"  duration:  {result.duration_s:.0f} s",
        f"  cache:     {result.cache.summary()}",
        f"  active:    {'yes' if result.activated else 'no (fdl libtorch activate ' + plan.variant + ')'}",
    ]
    if result.cache_warning:
        lines.append(f"  warning:   {result.cache_warning}")
    return "\n".join(lines) + "\n"
