"""``fdl libtorch build``: libtorch from source for exactly the GPU archs you have.

Its options are made from the settings table that also makes the ``libtorch.build``
schema (:func:`fdl.libtorch.build.build_settings`): each is declared once, with its type
and help. What the command line gave becomes the top layer of the request, over
``libtorch.build`` in fdl.yml and over a recipe, each value with its origin.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fdl.cli._progress import ProgressLine
from fdl.cli._render import report_install
from fdl.cli.commands._team import credentials, look_up, pull, team_registry
from fdl.errors import UsageError
from fdl.manifest.schema import Enum, Int, Spec, Version
from fdl.manifest.sections.libtorch_build import BuildSetting, build_settings

# The settings' table comes from the manifest's section, where it is declared: the source
# builder (fdl.libtorch.build) is imported only when a build is planned or run.
if TYPE_CHECKING:
    from fdl.cli._console import Console
    from fdl.cli._session import Session
    from fdl.libtorch import Choice, PushResult, SharedMatch
    from fdl.libtorch.build import BuildPlan, BuildResult, RocmBuildPlan

__all__ = ["build", "render_plan", "render_result"]

_OWN_OPTIONS = (
    ("list_recipes", "--list-recipes", "List the recipes and exit."),
    ("dry_run", "--dry-run", "Show the complete plan; run nothing."),
    ("as_json", "--json", "Output JSON."),
    (
        "push",
        "--push",
        "Push the finished variant to the team's registry (libtorch.registry, "
        "$FDL_LIBTORCH_REGISTRY).",
    ),
    (
        "no_registry",
        "--no-registry",
        "Build even when the team's registry holds a variant that fits.",
    ),
    (
        "no_pull",
        "--no-pull",
        "With --on: only record what the job pushed; do not pull it here.",
    ),
)


def _option_type(spec: Spec) -> Any:
    if isinstance(spec, Int):
        return int
    return str


def _metavar(setting: BuildSetting) -> str:
    if isinstance(setting.spec, Enum):
        return "|".join(setting.spec.choices)
    if isinstance(setting.spec, Int):
        return "N"
    if isinstance(setting.spec, Version):
        return "X.Y"
    return setting.key.upper()


def _flag_dest(setting: BuildSetting, flag: str) -> str:
    return f"{setting.key}_{flag.lstrip('-').replace('-', '_')}"


def _parameters() -> list[inspect.Parameter]:
    """The command's parameters, made from the settings table (one per option or flag)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    ]
    for setting in build_settings():
        help_text = setting.spec.description
        if setting.option:
            extra: dict[str, Any] = {}
            if isinstance(setting.spec, Int) and setting.spec.minimum is not None:
                extra["min"] = setting.spec.minimum
            option = typer.Option(
                *setting.option, help=help_text, metavar=_metavar(setting), **extra
            )
            kind = _option_type(setting.spec)
            params.append(
                inspect.Parameter(
                    setting.key, keyword, default=None, annotation=Annotated[kind | None, option]
                )
            )
        for flag, _, flag_help in setting.flags:
            option = typer.Option(flag, help=flag_help or help_text)
            params.append(
                inspect.Parameter(
                    _flag_dest(setting, flag),
                    keyword,
                    default=False,
                    annotation=Annotated[bool, option],
                )
            )
    on = typer.Option(
        "--on",
        help="Build as a job on this deploy target (SLURM): its node, cores, memory and "
        "time limit; the result is pushed to the team's registry and pulled here.",
        metavar="TARGET",
    )
    params.append(
        inspect.Parameter("on", keyword, default=None, annotation=Annotated[str | None, on])
    )
    rocm = typer.Option(
        "--rocm-archs",
        help='A build for these AMD GPUs (PYTORCH_ROCM_ARCH, "gfx90a;gfx1100"): planned and '
        "checked against this machine's ROCm; fdl does not run it yet.",
        metavar="GFX",
    )
    params.append(
        inspect.Parameter(
            "rocm_archs", keyword, default=None, annotation=Annotated[str | None, rocm]
        )
    )
    for dest, flag, help_text in _OWN_OPTIONS:
        params.append(
            inspect.Parameter(
                dest,
                keyword,
                default=False,
                annotation=Annotated[bool, typer.Option(flag, help=help_text)],
            )
        )
    return params


def _given(values: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """``{key: (value, flag)}`` for each setting the command line gave.

    Raises:
        UsageError: a value outside its choices, or two flags of one setting.
    """
    given: dict[str, tuple[Any, str]] = {}
    for setting in build_settings():
        value = values.get(setting.key)
        if setting.option and value is not None:
            flag = setting.option[0]
            if isinstance(setting.spec, Enum) and value not in setting.spec.choices:
                raise UsageError(
                    f"{flag} {value}: not one of {', '.join(setting.spec.choices)}",
                    hint=setting.spec.description,
                )
            given[setting.key] = (value, flag)
        chosen = [(f, v) for f, v, _ in setting.flags if values.get(_flag_dest(setting, f))]
        if len(chosen) > 1:
            raise UsageError(
                f"{' and '.join(f for f, _ in chosen)} exclude each other", hint="choose one"
            )
        if chosen:
            given[setting.key] = (chosen[0][1], chosen[0][0])
    return given


def build(ctx: typer.Context, **values: Any) -> None:
    """Build libtorch from source for a set of GPU archs (e.g. sm_61 + sm_120), checked first.

    Example: fdl libtorch build --archs "6.1;12.0" --dry-run
    """
    from fdl.libtorch import build_need, choose_source, gather_facts
    from fdl.libtorch.build import (
        build_request,
        check_source_release,
        plan_build,
        probe_machine,
    )

    session: Session = ctx.obj
    console = session.console
    as_json = bool(values.pop("as_json"))
    manifest = session.manifest_or_none()
    project_dir = manifest.directory if manifest is not None else None
    if values.pop("list_recipes"):
        _list_recipes(console, project_dir, as_json)
        return
    dry_run = bool(values.pop("dry_run"))
    rocm_archs = values.pop("rocm_archs")
    if rocm_archs is not None:
        _rocm_build(session, rocm_archs, values, manifest, dry_run=dry_run, as_json=as_json)
        return
    push, no_registry = bool(values.pop("push")), bool(values.pop("no_registry"))
    on, no_pull = values.pop("on"), bool(values.pop("no_pull"))
    registry = team_registry(session)
    if on is not None:
        from fdl.cli.commands.libtorch_build_on import build_on

        build_on(
            session,
            on,
            _given(values),
            registry,
            no_registry=no_registry,
            no_pull=no_pull,
            dry_run=dry_run,
            as_json=as_json,
        )
        return
    if no_pull:
        raise UsageError(
            "--no-pull is for a build on a deploy target",
            hint="fdl libtorch build --on TARGET --no-pull",
        )
    if push and not registry:
        raise UsageError(
            "--push: no team registry to push to",
            hint="set `libtorch.registry:` in fdl.yml or $FDL_LIBTORCH_REGISTRY, or push "
            "later: fdl libtorch push VARIANT --to REPO",
        )
    request = build_request(manifest, _given(values), session.cwd)
    facts = probe_machine(
        session.libtorch_context().libtorch_dir,
        environ=session.environ,
        docker=request.value("backend", "auto") != "native",
        gpus=request.archs is None and not request.value("cpu", False),
        source=request.source.value if request.source is not None else None,
        project=project_dir,
    )
    plan = plan_build(request, facts)
    check_source_release(request, plan.torch, manifest, session.cwd)
    need = build_need(plan, no_registry=no_registry, fetch_only=request.value("fetch_only", False))
    gathered = gather_facts(
        need,
        registry=registry,
        look_up=lambda: look_up(
            session,
            registry or "",
            torch=plan.torch,
            gpus=sorted({target.capability for target in plan.archs}),
            driver=facts.driver,
        ),
    )
    choice = choose_source(need, gathered)
    if choice.source == "registry" and gathered.shared is not None:
        _pull_instead(session, plan, gathered.shared, choice, dry_run=dry_run, as_json=as_json)
        return
    if dry_run:
        if as_json:
            console.json({**plan.to_json(), "choice": choice.to_json()})
        else:
            console.out(render_plan(plan, dry_run=True), end="")
            console.out("\n".join(choice.lines()))
        return
    if request.value("fetch_only", False):
        _fetch_only(session, plan, as_json=as_json)
        return
    if not as_json:
        console.info(render_plan(plan, dry_run=False).rstrip("\n"))
    result = _execute(session, plan)
    pushed = _push(session, result, registry) if push and registry else None
    if as_json:
        console.json({**result.to_json(), **({"pushed": pushed.to_json()} if pushed else {})})
    else:
        console.info(render_result(result).rstrip("\n"))
        if pushed is not None:
            console.info(f"pushed: {pushed.reference}")


def _pull_instead(
    session: Session,
    plan: BuildPlan,
    shared: SharedMatch,
    choice: Choice,
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    """The team's registry holds a variant that fits: pull it instead of building."""
    console = session.console
    took = f", about {plan.estimate.duration()}" if plan.estimate is not None else ""
    build = f"fdl libtorch build --no-registry (builds {plan.variant}{took})"
    if dry_run:
        if as_json:
            console.json(
                {
                    "action": "pull",
                    "reason": shared.reason(),
                    "command": " ".join(shared.command),
                    "shared": shared.to_json(),
                    "build": plan.to_json(),
                    "choice": choice.to_json(),
                }
            )
        else:
            console.out(f"plan: pull: {shared.reason()}\n  command:  {' '.join(shared.command)}")
            console.out("\n".join([f"  or:       {build}", *choice.lines()]))
        return
    console.info(f"plan: pull: {shared.reason()} (instead of {build})")
    result = pull(session, shared.remote.pinned, name=plan.variant, activate=plan.activate)
    if as_json:
        console.json({"action": "pull", **result.to_json()})
    else:
        report_install(console, result.install, as_json=False)


def _push(session: Session, result: BuildResult, registry: str) -> PushResult:
    from fdl.libtorch import push_variant

    name = result.info.name
    return push_variant(
        session.libtorch_context(),
        name,
        registry,
        credentials=credentials(session),
        on_line=session.console.info,
    )


_params = _parameters()
build.__signature__ = inspect.Signature(_params)  # type: ignore[attr-defined]
build.__annotations__ = {p.name: p.annotation for p in _params}


def _fetch_only(session: Session, plan: BuildPlan, *, as_json: bool) -> None:
    """--fetch-only: every download of the build, and nothing else."""
    from fdl.libtorch.build import fetch_sources

    console = session.console
    progress = ProgressLine(console, f"fetching the sources of {plan.variant}")
    try:
        where = fetch_sources(plan, environ=session.environ, on_line=console.debug)
    except BaseException:
        progress.close()
        console.info(f"full log: {plan.log_file}")
        raise
    progress.close(f"fetched the sources of {plan.variant}")
    if as_json:
        console.json({"fetched": str(where), "backend": plan.backend, "log": str(plan.log_file)})
        return
    if plan.backend == "docker":
        console.out(
            f"fetched into the build cache of this engine ({where}): "
            "`fdl libtorch build --docker --offline` with the same options compiles from it"
        )
    else:
        console.out(
            f"fetched into {where}: `fdl libtorch build --offline` with the same options "
            "compiles from it; to build on an offline machine, copy that directory to the "
            "same place under its FDL_HOME (or pass it with --source)"
        )


def _execute(session: Session, plan: BuildPlan) -> BuildResult:
    from fdl.libtorch.build import StatusParser, run_build

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


def _list_recipes(console: Console, project_dir: Path | None, as_json: bool) -> None:
    from fdl.errors import ManifestError, ManifestErrors
    from fdl.libtorch.recipes import list_recipes

    problems: list[ManifestError] = []
    recipes = list_recipes(project_dir, problems)
    for problem in problems:  # the others are listed all the same
        for error in problem.errors if isinstance(problem, ManifestErrors) else [problem]:
            where = f"{error.location}: " if error.location else ""
            console.warn(where + error.message + (f" ({error.hint})" if error.hint else ""))
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
        return
    width = max((len(r.name) for r in recipes), default=0)
    for recipe in recipes:
        where = "" if recipe.builtin else f"  ({recipe.path})"
        console.out(f"{recipe.name.ljust(width)}  {recipe.description}{where}")


def _rocm_build(
    session: Session,
    text: str,
    values: dict[str, Any],
    manifest: Any,
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    """``--rocm-archs``: the ROCm build's plan and this machine's problems with it (exit 4
    while there are any); fdl does not run it yet, so without ``--dry-run`` it says so."""
    from fdl.errors import EnvironmentProblem
    from fdl.libtorch.build import parse_rocm_archs, plan_rocm_build, rocm_build_facts

    archs = parse_rocm_archs(text)
    source = values.get("source")
    torch = values.get("torch") or session.libtorch_settings().torch
    if torch is None:
        from fdl.compat import resolve_torch_version

        torch = resolve_torch_version(None)
    facts = rocm_build_facts(session.environ, Path(source) if source else None)
    plan = plan_rocm_build(str(torch), archs, facts)
    if as_json:
        session.console.json({**plan.to_json(), "dry_run": dry_run})
    else:
        session.console.out(_render_rocm(plan), end="")
    if not plan.ready:
        first, fix = plan.problems[0]
        more = f" (and {len(plan.problems) - 1} more, above)" if len(plan.problems) > 1 else ""
        raise EnvironmentProblem(f"the ROCm build cannot run here: {first}{more}", hint=fix)
    if not dry_run:
        raise UsageError(
            "fdl plans and checks a ROCm source build but does not run it yet",
            hint="run the plan's steps in a PyTorch tree with its environment (shown above), "
            "or take an official ROCm build: fdl libtorch download --rocm 7.0",
        )


def _render_rocm(plan: RocmBuildPlan) -> str:
    env = " ".join(f"{k}={v}" for k, v in plan.env.items())
    lines = [
        f"libtorch {plan.torch} for AMD GPUs {' '.join(plan.archs)} (ROCm source build)",
        f"  ROCm:      {plan.facts.root or 'none found'}"
        + (f" (compiler {plan.facts.compiler})" if plan.facts.compiler else ""),
        f"  env:       {env}",
        *(f"  step:      {' '.join(step)}" for step in plan.steps),
    ]
    lines += [f"  problem:   {p}\n    fix:     {f}" for p, f in plan.problems]
    lines.append("  ready:     yes" if plan.ready else "  ready:     no")
    return "\n".join(lines) + "\n"


def render_plan(plan: BuildPlan, *, dry_run: bool) -> str:
    """The plan for people (``--dry-run`` without ``--json``, and before a real build)."""
    from fdl.libtorch.build import mask

    archs = (
        f"{plan.arch_list}  ({' '.join(plan.archs.codes())})" if plan.archs else "none (CPU build)"
    )
    lines = [
        f"libtorch source build{' (dry run: nothing is run)' if dry_run else ''}",
        f"  variant:   {plan.variant}  ->  {plan.output_dir}",
        f"  torch:     {plan.torch}" + (f"  (recipe {plan.recipe})" if plan.recipe else ""),
        f"  archs:     {archs}",
        # whether the result can run here comes first: a driver no GPU code runs on
        *(
            f"  warning:   {p.message} (fix: {p.hint})"
            for p in plan.problems
            if p.check == "driver"
        ),
        f"  toolkit:   {plan.toolkit}",
        f"  backend:   {plan.backend}"
        + (f"  (base image {plan.docker.base_image})" if plan.docker else ""),
        f"  jobs:      {plan.jobs}  ({plan.jobs_reason})",
        f"  cache:     {plan.cache.kind}"
        + (f"  ({plan.cache.remote or plan.cache.directory})" if plan.cache.enabled else ""),
        *(
            [f"  farm:      sccache-dist {plan.cache.dist.settings}"]
            if plan.cache.dist is not None
            else []
        ),
        f"  estimates: ~{plan.disk_gb:.0f} GB disk, ~{plan.memory_gb:.0f} GB RAM",
        *([f"  estimate:  {plan.estimate.summary()}"] if plan.estimate is not None else []),
        f"  log:       {plan.log_file}",
    ]
    for cost in plan.switch_costs:
        saves = ", ".join(cost.saves)
        lost = cost.costs or "nothing for these GPUs"
        lines.append(f"  off:       {cost.name} (saves {saves}; {lost})")
    for problem in plan.problems:
        if problem.check != "driver":
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
