"""The deploy plan: what would be pushed and submitted, decided before anything runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from fdl.deploy._backend import JobInputs, backend
from fdl.deploy._layers import choose_compression
from fdl.deploy._placement import ImageArchs, Placement, check_placement
from fdl.deploy._target import DeployTarget

__all__ = [
    "DeployPlan",
    "plan_deploy",
    "probe_command",
    "remote_name",
    "runs_local_images",
    "unmounted_outputs",
]


@dataclass(frozen=True)
class DeployPlan:
    """A target's submission, rendered.

    Attributes:
        target: The target.
        local_image: The built image's local tag.
        remote: Where it is pushed (``registry/project-profile:tag``).
        image: The reference submitted (``registry/project-profile@sha256:...``); before
            a push (``render``, ``--dry-run``) the tag it would push, never a made-up digest.
        job_name: The SLURM job / Kubernetes Job name.
        placement: Which of the target's GPUs the binaries cover.
        text: The sbatch script or the YAML stream.
        mounts: The image profile's mounts carried into a SLURM job (absolute sources).
        warnings: What the job would lose (an output directory no mount keeps).
        gpus: What ``fdl --gpus`` does on this target (None: not given).
    """

    target: DeployTarget
    local_image: str
    remote: str
    image: str
    job_name: str
    placement: Placement
    text: str
    mounts: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    gpus: str | None = None

    @property
    def filename(self) -> str:
        return f"{self.target.name}{backend(self.target.kind).suffix}"

    def to_json(self) -> dict[str, object]:
        return {
            "target": self.target.name,
            "kind": self.target.kind,
            "local_image": self.local_image,
            "remote": self.remote,
            "image": self.image,
            "pinned": "@sha256:" in self.image or self.image.startswith("sha256:"),
            "job_name": self.job_name,
            "placement": self.placement.to_json(),
            "compression": choose_compression(self.target).method,
            "compression_reason": choose_compression(self.target).reason,
            "file": self.filename,
            "mounts": [*self.mounts, *self.target.mounts],
            "warnings": list(self.warnings),
            "gpus": None
            if self.target.visible is None
            else {"devices": list(self.target.visible), "note": self.gpus},
            "text": self.text,
        }


def remote_name(target: DeployTarget, local_image: str) -> str:
    """The pushed name: the local repository's last component under the target's registry."""
    repository, sep, tag = local_image.rpartition(":")
    if not sep or "/" in tag:
        repository, tag = local_image, "latest"
    if target.registry is None:
        return f"{repository}:{tag}"
    return f"{target.registry}/{repository.rsplit('/', 1)[-1]}:{tag}"


def runs_local_images(target: DeployTarget) -> bool:
    """Whether the target can run an image of this host's store (docker/podman on SLURM)."""
    return backend(target.kind).runs_local_images(target)


def _job_name(project: str, target: DeployTarget) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", f"fdl-{project}-{target.name}".lower()).strip("-")
    return text[:52].rstrip("-")


# Options by which training programs name where they write (checkpoints, logs, models).
_OUTPUT_OPTIONS = (
    "--out",
    "--output",
    "--output-dir",
    "--out-dir",
    "--save-dir",
    "--checkpoint-dir",
    "--log-dir",
)


def unmounted_outputs(args: list[str], mounts: tuple[str, ...]) -> list[str]:
    """The container directories the program is told to write to (``--out DIR`` and the
    like) that no mount keeps: what is written there goes with the container."""
    targets = [PurePosixPath(m.split(":")[1]) for m in mounts if len(m.split(":")) >= 2]
    lost = []
    for index, word in enumerate(args):
        name, sep, value = word.partition("=")
        if name not in _OUTPUT_OPTIONS:
            continue
        if not sep:
            value = args[index + 1] if index + 1 < len(args) else ""
        path = PurePosixPath(value)
        if path.is_absolute() and not any(path == t or t in path.parents for t in targets):
            lost.append(value)
    return lost


def probe_command(target: DeployTarget, image: str, archs: ImageArchs) -> tuple[str, ...]:
    """The readiness gate a job runs on its nodes before training: ``fdl probe`` judging
    the node's GPUs and driver against the image's libtorch (its labels), NCCL being the
    image's. Empty when the target turns it off (``probe: false``) or the image holds no
    GPU code (a CPU job: nothing for the probe to judge)."""
    if not target.probe or archs.cuda is None:
        return ()
    return (
        "fdl",
        "probe",
        "--skip-mount",
        "--image",
        image,
        "--variant",
        archs.variant,
        "--cuda",
        archs.cuda,
        "--archs",
        " ".join(archs.codes),
    )


def visible_note(target: DeployTarget) -> str | None:
    """What ``fdl --gpus`` does on ``target`` (None: not given), said plainly.

    Raises:
        UsageError: the target asks for no GPUs, or an index is not below its
            ``gpus-per-node`` (a job's programs see only the GPUs it is given).
    """
    from fdl.errors import UsageError

    if target.visible is None:
        return None
    spec = ",".join(str(i) for i in target.visible)
    if target.gpus_per_node == 0:
        raise UsageError(
            f"--gpus {spec}: deploy target {target.name!r} asks for no GPUs (gpus-per-node: 0)",
            hint=f"set gpus-per-node in the target at {target.origin}, or drop --gpus",
        )
    if target.visible[-1] >= target.gpus_per_node:
        raise UsageError(
            f"--gpus {spec}: target {target.name!r} gives its job {target.gpus_per_node} "
            f"GPU(s) per node, numbered 0-{target.gpus_per_node - 1} within them",
            hint="--gpus names positions within the job's GPUs, not the node's",
        )
    return backend(target.kind).visible_note(target, spec)


def plan_deploy(
    target: DeployTarget,
    *,
    project: str,
    local_image: str,
    archs: ImageArchs,
    entrypoint: list[str],
    args: list[str],
    digest: str | None = None,
    mounts: tuple[str, ...] = (),
) -> DeployPlan:
    """Check placement and render the submission (pure).

    Args:
        target: The target.
        project: The project's name (job names).
        local_image: The built image's local tag.
        archs: The image's libtorch archs and CUDA.
        entrypoint: The image's entrypoint (pyxis runs it as the command).
        args: The image's default arguments (overridden by the target's ``args``).
        digest: The pushed image's digest (without a registry: the local image's ID);
            None (nothing pushed yet: ``render``) names the image by its tag.
        mounts: The image profile's mounts (``/abs/source:/target[:ro]``), carried into a
            SLURM job before the target's own ``mounts:`` (a cluster shares the project's
            filesystem); Kubernetes pods get none (the project's paths are not the node's).

    Raises:
        EnvironmentProblem, UsageError: the binaries cannot run on the target's GPUs.
    """
    placement = check_placement(target, archs)
    gpus = visible_note(target)
    remote = remote_name(target, local_image)
    repository = remote.rsplit(":", 1)[0]
    # Without a registry the image stays on this host: its ID is the content digest
    # (docker and podman run an image by ID).
    if digest and target.registry is None and runs_local_images(target):
        image = digest
    elif digest:
        image = f"{repository}@{digest}"
    else:
        image = remote
    job_name = _job_name(project, target)
    program_args = list(target.args) if target.args is not None else list(args)
    via = backend(target.kind)
    carried = mounts if via.carries_profile_mounts else ()
    lost = unmounted_outputs(program_args, (*carried, *target.mounts))
    warnings = tuple(
        f"the program writes to {path} (its arguments), which no mount of target "
        f"{target.name!r} keeps: what it saves there is lost with the container; mount a "
        f"directory there (`mounts:` in the target, or the image profile's)"
        for path in lost
    )
    job = JobInputs(
        image=image,
        job_name=job_name,
        entrypoint=entrypoint,
        args=args,
        mounts=carried,
        allowed=placement.allowed,
        probe=probe_command(target, image, archs),
    )
    text = via.render(target, job)
    return DeployPlan(
        target, local_image, remote, image, job_name, placement, text, carried, warnings, gpus
    )
