"""``fdl deploy submit`` as stages: check the runtime, build, place by the built image,
make the mount sources, push, submit. Each stage refuses before the next one runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.deploy._kube_exec import kube_check, submit_kubernetes
from fdl.deploy._plan import DeployPlan, runs_local_images
from fdl.deploy._prepare import Prepared, build_for_deploy, push_image
from fdl.deploy._runtime import check_runtime
from fdl.deploy._slurm_exec import JobRecord, submit_sbatch
from fdl.engine import Engine
from fdl.errors import UsageError
from fdl.runner import Runner

__all__ = ["Submitted", "check_registry", "submit_target"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class Submitted:
    """What was submitted: the plan by digest, and the job's record."""

    plan: DeployPlan
    record: JobRecord


def submit_target(
    prepared: Prepared,
    state_dir: Path,
    *,
    engine: Engine,
    runner: Runner,
    environ: Mapping[str, str] | None = None,
    info: Say | None = None,
    warn: Say | None = None,
) -> Submitted:
    """Build the target's image, push it and submit it by digest.

    Raises:
        UsageError: no registry where one is needed; SLURM refused the request.
        EnvironmentProblem: the runtime, the Kubernetes client or context, the build, the
            placement of what was built.
    """
    target = prepared.target
    say, caution = info or (lambda _: None), warn or (lambda _: None)
    check_registry(prepared)
    # The runtime, the client and the context before anything is built or pushed.
    if target.kind == "slurm":
        for text in check_runtime(target, runner):
            caution(text)
    else:
        kube_check(target.context)
    archs = build_for_deploy(prepared, engine, environ=environ, on_status=say)
    plan = prepared.plan(archs=archs)  # placement again, by what the image holds
    for text in plan.warnings:
        caution(text)
    if target.kind == "slurm":
        _make_mount_sources(prepared)
    if target.registry is None:
        digest = engine.inspect_image(plan.local_image).id
    else:
        digest = push_image(engine, target, plan.local_image, plan.remote, on_line=say).digest
    plan = prepared.plan(digest, archs=archs)
    if target.kind == "slurm":
        return Submitted(plan, submit_sbatch(plan, state_dir, runner))
    return Submitted(plan, submit_kubernetes(plan, state_dir))


def check_registry(prepared: Prepared) -> None:
    """Refuse a target that needs a registry and has none (before any build).

    Raises:
        UsageError: no ``registry:`` and a runtime that cannot run this host's images.
    """
    target = prepared.target
    if target.registry is None and not runs_local_images(target):
        raise UsageError(
            f"deploy target {target.name!r} has no `registry:` to push the image to",
            hint=f"set deploy.{target.name}.registry (e.g. ghcr.io/you); only "
            "docker/podman on SLURM can run this host's images without one",
        )


def _make_mount_sources(prepared: Prepared) -> None:
    """The profile's writable mount sources that do not exist yet, made as `fdl image run`
    makes them (owned by the image's user when fdl runs as root): a source the engine
    creates belongs to root, and the job's non-root user could not write there."""
    from fdl.images import plan_run, prepare_mounts

    if prepared.spec.mounts and prepared.directory is not None:
        prepare_mounts(plan_run(prepared.spec, prepared.directory))
