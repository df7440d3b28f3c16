"""The plan of a manifest command: the exact argv, directory and environment it runs with.

Planning is separate from running: ``--dry-run`` prints the plan, help shows
a plan with placeholders for the arguments, and the executor runs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fdl.errors import EnvironmentProblem, Location, ManifestError
from fdl.manifest import Manifest
from fdl.tasks._compose import quote
from fdl.tasks._contract import (
    BASH_PROLOGUE,
    LOGICAL_GPU_SERVICE,
    gpu_feature,
    gpu_service,
)
from fdl.tasks._docker import ComposeProgram, compose_program, in_container
from fdl.tasks._env import EnvChange, apply_changes, export_line
from fdl.tasks._framework_env import build_tools, framework_env
from fdl.tasks._libtorch_env import (
    CPU_VARIANT,
    LibtorchState,
    Variant,
    active_libtorch,
    compose_variables,
    nccl_exports,
    read_variant,
    variant_exports,
)
from fdl.tasks._resolve import Kind, Resolution, locate

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

    # a dry run never loads the runner; the compose file's reader only for docker:
    from fdl.runner import Runner
    from fdl.tasks._compose_file import ComposeProject

__all__ = ["CommandPlan", "DockerWrap", "build_plan"]

SHELL = "sh"
DEFAULT_CONTAINER_ROOT = "/workspace"


@dataclass(frozen=True)
class DockerWrap:
    """How a command is wrapped into ``docker compose run``.

    Attributes:
        service: The compose service.
        compose_file: The compose file (compose runs in its directory).
        container_dir: Where the script runs inside the container.
        env: Variables passed with ``-e``.
        prepend: Path lists extended inside the container (``LD_LIBRARY_PATH``),
            by ``export`` lines before the script, keeping the image's value.
        profile: The manifest's image profile of the same name (``images.<service>``),
            whose image fdl builds before running when it is missing.
        image: The service's ``image:`` in the compose file.
        compose: The compose program's prefix (``docker compose``).
        remembered: The compose program came from an earlier run's probes: a failure is
            explained by asking docker again (``fdl.tasks.recheck_engine``).
    """

    service: str
    compose_file: Path
    container_dir: str
    env: tuple[EnvChange, ...]
    prepend: tuple[EnvChange, ...]
    profile: str | None = None
    image: str | None = None
    compose: tuple[str, ...] = ()
    remembered: bool = False


@dataclass(frozen=True)
class CommandPlan:
    """Everything needed to run (or show) one manifest command.

    Attributes:
        name: The command words joined (``sub quick``).
        kind: ``run``, ``entry`` or ``preset``.
        description: The command's description, if any.
        script: The shell script the command is (inside the container for docker),
            with the user's arguments quoted in place.
        argv: The exact program and arguments started on this machine: ``sh -c``
            with a script that refers to the user's arguments as ``"$@"``,
            followed by ``sh`` (``$0``) and the arguments (:attr:`args`).
        args: The user's arguments, the last words of :attr:`argv`.
        cwd: The directory ``argv`` starts in.
        env: Variables set for ``argv`` on this machine.
        docker: The docker wrapping, when the command runs in a compose service.
        declared_at: Where the command is declared.
        overlay: The selected environment overlay, if any.
        notes: Remarks to show the user.
    """

    name: str
    kind: str
    description: str | None
    script: str
    argv: tuple[str, ...]
    cwd: Path
    env: tuple[EnvChange, ...]
    docker: DockerWrap | None = None
    declared_at: Location | None = None
    overlay: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    args: tuple[str, ...] = ()

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this plan's variables applied (what the child gets)."""
        return apply_changes(base, self.env)


def _service(resolution: Resolution) -> str | None:
    if resolution.kind is Kind.RUN:
        return resolution.spec.get("docker")
    nested = resolution.nested
    return nested.data.get("docker") if nested is not None else None


def _docker_location(resolution: Resolution, root: Manifest) -> Location | None:
    if resolution.kind is Kind.RUN:
        return locate(resolution.manifest, (*resolution.key, "docker"), root.directory)
    if resolution.nested is not None:
        return locate(resolution.nested, ("docker",), root.directory)
    return None


# Passed into containers too when set (fdl's -v/-q set them; floDl reads FLODL_VERBOSITY).
FORWARDED = ("FDL_VERBOSITY", "FLODL_VERBOSITY")


def _base_exports(
    directory: str, overlay: str | None, environ: Mapping[str, str]
) -> list[EnvChange]:
    changes = [EnvChange("FDL_PROJECT_ROOT", directory)]
    if overlay:
        changes.append(EnvChange("FDL_ENV", overlay))
    changes.extend(EnvChange(name, environ[name]) for name in FORWARDED if name in environ)
    return changes


def _image_profile(root: Manifest, service: str) -> dict[str, Any] | None:
    """The dev or train profile ``images.<service>`` of the manifest, if there is one."""
    profiles = root.data.get("images") or {}
    raw = profiles.get(service) if isinstance(profiles, dict) else None
    if raw is None and service in profiles:
        raw = {}
    if not isinstance(raw, dict) or (raw.get("kind") or service) not in ("dev", "train"):
        return None
    return raw


def _user_variables(environ: Mapping[str, str]) -> list[EnvChange]:
    """``FDL_UID``/``FDL_GID`` for compose files that run dev containers as the host
    user (``user: "${FDL_UID:-1000}:${FDL_GID:-1000}"``), unless already set."""
    ids = {"FDL_UID": os.getuid, "FDL_GID": os.getgid}
    return [EnvChange(name, str(get())) for name, get in ids.items() if name not in environ]


def _kind(variant: Variant) -> str:
    """``nvidia``, ``amd`` or ``cpu``: the kind of service a variant is for."""
    return variant.vendor if variant.vendor in ("nvidia", "amd") else "cpu"


def _mounted_libtorch(
    project: ComposeProject, service: str, state: LibtorchState
) -> tuple[str, Variant] | None:
    """Where the service sees a libtorch: an explicit mount first, else through a wider mount
    (the project's), then only a variant of the service's own kind: a CPU service is never
    given a CUDA variant's paths over its image's own libtorch."""
    from fdl.tasks._compose_file import container_path

    mounts = project.mounts.get(service, [])
    active = state.active
    for mount in mounts:
        if active is not None and mount.source == active.path:
            return mount.target, active
    for mount in mounts:
        try:
            name = mount.source.relative_to(state.directory).as_posix()
        except ValueError:
            continue
        if (mount.source / "lib").is_dir():
            return mount.target, read_variant(state.directory, name)
    if active is not None and _kind(active) == project.gpus.get(service, "cpu"):
        inside = container_path(mounts, active.path)
        if inside is not None:
            return inside, active
    return None


def _service_working_dir(
    project: ComposeProject, service: str, mounted_at: str | None
) -> str | None:
    """The service's own ``working_dir:`` when it names a place other than the project's
    mount point: `run:` scripts run there, as floDl's reference CLI runs them (floDl's
    hf-parity service sets ``/workspace/flodl-hf`` and flodl-hf/parity/fdl.yml's scripts
    say ``python scripts/parity_bert.py``, relative to it). A working_dir that is just where
    the compose file's directory is mounted (``mounted_at``, the usual ``/workspace``) leaves
    the script in the directory that matches its manifest."""
    workdir = project.working_dirs.get(service)
    if workdir is None:
        return None
    workdir = workdir.rstrip("/") or "/"
    if mounted_at is not None and workdir == mounted_at.rstrip("/"):
        return None
    return workdir


def _shell(script: str, args: tuple[str, ...]) -> tuple[str, ...]:
    """``sh -c SCRIPT`` with ``args`` as its positional parameters (``$0`` is ``sh``)."""
    return (SHELL, "-c", script, SHELL, *args) if args else (SHELL, "-c", script)


def _bash_in_container(script: str, args: tuple[str, ...]) -> tuple[str, ...]:
    """``SCRIPT`` under bash in a container, as floDl's CLI runs it, or under sh (said on
    stderr) where the image has no bash: ``sh -c PROLOGUE SCRIPT ARGS...``."""
    return (SHELL, "-c", BASH_PROLOGUE, script, *args)


@dataclass
class _Planner:
    resolution: Resolution
    root: Manifest
    environ: Mapping[str, str]
    overlay: str | None
    runner: Runner | None
    strict: bool
    notes: list[str] = field(default_factory=list)
    exports: tuple[EnvChange, ...] = ()

    def compose_command(self) -> ComposeProgram:
        try:
            return compose_program(self.runner, self.environ)
        except EnvironmentProblem as problem:
            # FDL_COMPOSE is the user's own setting: one that is not a command line is an
            # error for a dry run too (it printed a plan and exited 0); help only notes it
            forced = bool((self.environ or {}).get("FDL_COMPOSE", "").strip())
            if self.strict or (forced and not self.resolution.help):
                raise
            self.notes.append(f"{problem.message}; the real run will fail")
            return ComposeProgram(["docker", "compose"], [])

    def host(
        self, script: str, args: tuple[str, ...], state: LibtorchState
    ) -> tuple[tuple[str, ...], Path, list[EnvChange]]:
        env = _base_exports(str(self.root.directory), self.overlay, self.environ)
        env.append(gpu_feature(state.active))
        env.extend(self.exports)
        if state.active is not None:
            env.extend(
                variant_exports(
                    str(state.active.path),
                    state.active,
                    rocm_lib=_host_rocm_lib(self.environ) if state.active.vendor == "amd" else None,
                )
            )
            env.extend(nccl_exports(state))
        return _shell(script, args), self.resolution.directory, env

    def docker(
        self, service: str, script: str, args: tuple[str, ...], state: LibtorchState
    ) -> tuple[tuple[str, ...], Path, list[EnvChange], DockerWrap]:
        from fdl.tasks._compose_file import container_path, find_compose_file, load_compose

        where = _docker_location(self.resolution, self.root)
        compose_file = find_compose_file(self.resolution.directory)
        if compose_file is None:
            raise ManifestError(
                f"`fdl {self.resolution.name}` runs in docker service {service!r}, but there is no "
                f"compose.yaml or docker-compose.yml in {self.resolution.directory} or above",
                location=where,
                hint="add a compose file with that service, or remove `docker:`",
            )
        # -v/-q's variables on compose's side too (floDl's compose files pass FLODL_VERBOSITY
        # on with a bare `environment:` entry), so that a dry run's script sets them as well
        forwarded = [
            EnvChange(name, self.environ[name]) for name in FORWARDED if name in self.environ
        ]
        contract = [gpu_feature(state.active), *self.exports]
        # FDL_ENV for compose too, as floDl's CLI exports it to every child (main.rs:147-154)
        selected = [EnvChange("FDL_ENV", self.overlay)] if self.overlay else []
        host_env = [
            *selected,
            *compose_variables(state),
            *_user_variables(self.environ),
            *forwarded,
            *contract,
        ]
        project = load_compose(compose_file, apply_changes(self.environ, host_env))
        logical = ""
        if service == LOGICAL_GPU_SERVICE:  # floDl 0.8's `docker: gpu` (run.rs:678-745)
            service, fallback = gpu_service(state.active, project.services)
            if fallback is not None:
                self.notes.append(fallback)
            active = state.active.name if state.active is not None else "none"
            logical = f" (what `docker: gpu` stands for with the active libtorch, {active})"
        if service not in project.mounts:
            listing = ", ".join(project.services) or "none"
            raise ManifestError(
                f"docker service {service!r}{logical} is not defined in {compose_file}",
                location=where,
                hint=f"services there: {listing}",
            )
        mounts = project.mounts[service]
        container_dir = container_path(mounts, self.resolution.directory)
        container_root = container_path(mounts, self.root.directory)
        if container_dir is None:
            container_dir = self.assumed_dir(project, service)
        own = _service_working_dir(project, service, container_path(mounts, project.directory))
        if own is not None and self.resolution.kind is Kind.RUN:
            container_dir = own
        env = _base_exports(container_root or DEFAULT_CONTAINER_ROOT, self.overlay, self.environ)
        # the launcher's envelope (it may hold a join token) goes by name, its value in
        # compose's environment, never on a command line (`ps` shows those)
        by_name = [
            c.name
            for c in contract
            if c.name.startswith("FLODL_INTERNAL_") or c.name == "FLODL_TESTING_CLUSTER_JSON"
        ]
        env.extend(c for c in contract if c.name not in by_name)
        prepend: list[EnvChange] = []
        profile = _image_profile(self.root, service)
        baked = profile is not None and profile.get("libtorch") == "baked"
        # A baked image's own libtorch wins over one seen through the project mount.
        mounted = None if baked else _mounted_libtorch(project, service, state)
        wanted = profile.get("variant") if profile is not None and not baked else None
        if (
            isinstance(wanted, str)
            and "/" in wanted
            and not (state.directory / wanted / "lib").is_dir()
            # an active CUDA build stands in for it (`follow-active`): no note then
            and (mounted is None or mounted[1].cuda is None)
        ):
            # the cuda service of a fresh project before `fdl setup` has installed its build
            instead = f"; it sees {mounted[1].name} instead" if mounted is not None else ""
            fix = (
                "fdl libtorch install --from-wheel --cpu" if wanted == CPU_VARIANT else "fdl setup"
            )
            self.notes.append(
                f"service {service!r} uses libtorch {wanted} (images.{service}.variant), which "
                f"is not installed{instead}: {fix}"
            )
        if mounted is not None:
            rocm_lib = _image_rocm_lib() if mounted[1].vendor == "amd" else None
            for change in variant_exports(*mounted, rocm_lib=rocm_lib):
                (prepend if change.prepend else env).append(change)
        elif (
            state.active is not None
            and not baked
            and container_path(mounts, state.active.path) is not None
        ):  # seen through the project's mount, but not of the service's kind
            builds = {"nvidia": "a CUDA build", "amd": "a ROCm build", "cpu": "a CPU build"}
            gpu = {"nvidia": "NVIDIA GPUs", "amd": "AMD GPUs"}.get(project.gpus.get(service, ""))
            self.notes.append(
                f"the active libtorch ({state.active.name}) is {builds[_kind(state.active)]} and "
                f"service {service!r} has {gpu or 'no GPU'}: it keeps its image's own libtorch "
                "(LIBTORCH is not set inside the container)"
            )
        elif state.active is not None and not baked:  # a baked image sets LIBTORCH itself
            self.notes.append(
                f"the active libtorch ({state.active.name}) is not mounted into service "
                f"{service!r}; LIBTORCH is not set inside the container"
            )
        prelude = [export_line(change) for change in prepend]
        inner = "\n".join([f"cd {quote(container_dir)} || exit 125", *prelude, script])
        flags = [part for change in env for part in ("-e", f"{change.name}={change.value}")]
        flags += [part for name in by_name for part in ("-e", name)]
        compose = self.compose_command()
        host_env = [*host_env, *compose.env]
        argv = (*compose.argv, "run", "--rm", *flags, service, *_bash_in_container(inner, args))
        wrap = DockerWrap(
            service,
            compose_file,
            container_dir,
            tuple(env),
            tuple(prepend),
            profile=service if profile is not None else None,
            image=project.images.get(service),
            compose=tuple(compose.argv),
            remembered=compose.remembered,
        )
        return argv, project.directory, host_env, wrap

    def assumed_dir(self, project: ComposeProject, service: str) -> str:
        try:
            relative = self.resolution.directory.relative_to(project.directory).as_posix()
        except ValueError:
            raise ManifestError(
                f"`fdl {self.resolution.name}` runs in {self.resolution.directory}, which is "
                f"outside the compose project {project.directory}",
                location=_docker_location(self.resolution, self.root),
                hint=f"bind-mount that directory into service {service!r}",
            ) from None
        self.notes.append(
            f"service {service!r} has no bind mount of {project.directory}; "
            f"assuming it is at {DEFAULT_CONTAINER_ROOT}"
        )
        return DEFAULT_CONTAINER_ROOT if relative == "." else f"{DEFAULT_CONTAINER_ROOT}/{relative}"


def build_plan(
    resolution: Resolution,
    script: str,
    *,
    root: Manifest,
    environ: Mapping[str, str],
    overlay: str | None = None,
    runner: Runner | None = None,
    strict: bool = True,
    run: tuple[str, tuple[str, ...]] | None = None,
    exports: tuple[EnvChange, ...] = (),
) -> CommandPlan:
    """Decide how ``script`` runs: on this machine, or in the command's compose service.

    Args:
        resolution: The resolved command.
        script: The composed shell script.
        root: The project's root manifest (libtorch and the container root come from it).
        environ: The environment fdl runs in.
        overlay: The selected environment overlay (passed on as ``FDL_ENV``).
        runner: Used to find the compose program.
        strict: False for help and dry runs: a missing compose program becomes a note.
        run: The script that runs and its positional parameters (the user's
            arguments as ``"$@"``); default: ``script`` without parameters.
        exports: Variables the command gets on this machine and in its container
            (``--gpus``'s masks, a cluster command's envelope).

    Raises:
        ManifestError: the compose file or service is missing.
        EnvironmentProblem: no compose program (when ``strict``).
    """
    planner = _Planner(
        resolution, root, environ, overlay, runner, strict, list(resolution.notes), exports
    )
    state = active_libtorch(root.directory, environ)
    if state.problem:
        planner.notes.append(f"{state.problem}; libtorch variables are not set")
    elif state.active is None and root.data.get("libtorch") is not None:
        # The project declares libtorch but none is installed: say so before CMake or
        # cargo fail with a message that does not name fdl.
        planner.notes.append(
            f"no active libtorch variant in {state.directory}: LIBTORCH and "
            "CMAKE_PREFIX_PATH are not set; install one with "
            "`fdl libtorch install --from-wheel` or `fdl setup`"
        )
    service = _service(resolution)
    wrap: DockerWrap | None = None
    if service and in_container(environ):
        planner.notes.append(
            f"already inside a container: running directly instead of in service {service!r}"
        )
        service = None
    text, args = run if run is not None else (script, ())
    if service:
        argv, cwd, env, wrap = planner.docker(service, text, args, state)
    else:
        # on this machine the active variant is the one the framework gets: one it
        # cannot compile against stops a run before cargo or CMake start
        framework = framework_env(root, state, resolution.name)
        if framework.refusal is not None and strict and build_tools(text):
            raise framework.refusal
        argv, cwd, env = planner.host(text, args, state)
        planner.notes.extend(framework.notes)
        env.extend(framework.exports)
    description = resolution.spec.get("description")
    if resolution.nested is not None and resolution.kind is not Kind.PRESET:
        # a nested manifest's own description first, as floDl's CLI shows it (and fdl for
        # a group); the one it is declared with in the parent is what the listing shows
        description = resolution.nested.data.get("description") or description
    return CommandPlan(
        name=resolution.name,
        kind=resolution.kind.value,
        description=description,
        script=script,
        argv=tuple(argv),
        cwd=cwd,
        env=tuple(env),
        docker=wrap,
        declared_at=locate(resolution.manifest, resolution.key, root.directory, at_key=True),
        overlay=overlay,
        notes=tuple(planner.notes),
        args=tuple(args),
    )


def _image_rocm_lib() -> str:
    """The runtime's library directory in floDl's ROCm images (ROCm's own, at the default
    root: ``/opt/rocm/lib``)."""
    from fdl.compat.rocm import rocm_runtime_facts

    facts = rocm_runtime_facts()
    return facts.library(facts.default_root)


def _host_rocm_lib(environ: Mapping[str, str] | None) -> str | None:
    """This machine's ROCm runtime library directory (``$ROCM_PATH/lib``, ...), if any."""
    import os

    from fdl.compat.rocm import rocm_runtime_facts
    from fdl.system.survey import rocm_runtime

    found = rocm_runtime(os.environ if environ is None else environ)
    return rocm_runtime_facts().library(str(found)) if found is not None else None
