"""``fdl deploy submit`` as stages: check the runtime, build, place by the built image,
make the mount sources, push, submit. Each stage refuses before the next one runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.deploy._backend import backend
from fdl.deploy._plan import DeployPlan, runs_local_images
from fdl.deploy._prepare import Prepared, build_for_deploy, push_image
from fdl.deploy._record import JobFile, JobRecord
from fdl.engine import Engine
from fdl.errors import UsageError
from fdl.runner import Runner

__all__ = [
    "Submitted",
    "check_registry",
    "submit_kubernetes",
    "submit_plan",
    "submit_sbatch",
    "submit_target",
]

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
    via = backend(target.kind)
    say, caution = info or (lambda _: None), warn or (lambda _: None)
    check_registry(prepared)
    # The runtime, the client and the context before anything is built or pushed.
    for text in via.check(target, runner):
        caution(text)
    archs = build_for_deploy(prepared, engine, environ=environ, on_status=say)
    plan = prepared.plan(archs=archs)  # placement again, by what the image holds
    for text in plan.warnings:
        caution(text)
    if plan.gpus:
        say(plan.gpus)
    if via.carries_profile_mounts:
        _make_mount_sources(prepared)
    if target.registry is None:
        digest = engine.inspect_image(plan.local_image).id
    else:
        digest = push_image(engine, target, plan.local_image, plan.remote, on_line=say).digest
    plan = prepared.plan(digest, archs=archs)
    return Submitted(plan, submit_plan(plan, state_dir, runner))


def submit_plan(plan: DeployPlan, state_dir: Path, runner: Runner) -> JobRecord:
    """Submit a rendered plan through its target's backend and record the job (kept as
    ``plan.filename`` under ``state_dir``).

    Raises:
        UsageError: the cluster refused a value of the target, with its reason and the fix.
        EnvironmentProblem: the cluster's tools or client are missing.
    """
    job = JobFile(plan.text, plan.filename, plan.job_name, plan.image)
    return backend(plan.target.kind).submit(plan.target, job, state_dir, runner)


def submit_sbatch(plan: DeployPlan, state_dir: Path, runner: Runner) -> JobRecord:
    """:func:`submit_plan` of a SLURM plan: ``sbatch --test-only``, then the submit."""
    return submit_plan(plan, state_dir, runner)


def submit_kubernetes(plan: DeployPlan, state_dir: Path) -> JobRecord:
    """:func:`submit_plan` of a Kubernetes plan: its objects created through the API."""
    from fdl.runner import default_runner

    return submit_plan(plan, state_dir, default_runner())


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
