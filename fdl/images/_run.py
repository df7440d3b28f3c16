"""Running a training image with the project's directories mounted as declared."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fdl.engine import Mount, RunSpec
from fdl.errors import UsageError
from fdl.images._spec import ImageSpec

__all__ = ["RunPlan", "host_has_gpus", "plan_run", "prepare_mounts", "stale_image"]

MANIFEST_HASH = "dev.fdl.manifest-hash"

_GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia0")


def host_has_gpus(devices: Sequence[str] = _GPU_DEVICES) -> bool:
    """Whether this machine has NVIDIA GPUs (their device files exist)."""
    return any(Path(device).exists() for device in devices)


@dataclass(frozen=True)
class RunPlan:
    """A container run, and the host directories to create before it.

    Attributes:
        run: What the engine runs.
        create: Writable mount sources that do not exist yet.
        owner: The uid to give created directories (the image's user when fdl runs
            as root, so the container can write there); None to keep fdl's own.
    """

    run: RunSpec
    create: tuple[Path, ...]
    owner: int | None


def plan_run(
    spec: ImageSpec,
    project_dir: Path,
    argv: Sequence[str] = (),
    *,
    gpus_present: bool = False,
    host_uid: int | None = None,
    host_gid: int | None = None,
    interactive: bool = False,
) -> RunPlan:
    """How ``fdl image run`` runs ``spec``'s image.

    Containers run as the caller's uid:gid when that is not root, so files written
    to the mounted directories belong to the caller; as root they keep the image's
    non-root user.

    Raises:
        UsageError: a read-only mount's source is missing.
    """
    mounts: list[Mount] = []
    create: list[Path] = []
    for mount in spec.mounts:
        source = (project_dir / mount.source).resolve()
        if not source.exists():
            if mount.read_only:
                raise UsageError(
                    f"images.{spec.profile}.mounts: {mount.source} does not exist",
                    hint=f"create {source} (it is mounted read-only at {mount.target})",
                )
            create.append(source)
        mounts.append(Mount(str(source), mount.target, read_only=mount.read_only))
    uid = os.getuid() if host_uid is None else host_uid
    gid = os.getgid() if host_gid is None else host_gid
    user = f"{uid}:{gid}" if uid != 0 else None
    run = RunSpec(
        image=spec.tag,
        argv=tuple(argv),
        mounts=tuple(mounts),
        env={name: None for name in spec.pass_env},
        user=user,
        gpus=_gpus(spec, gpus_present),
        interactive=interactive,
        tty=interactive,
        shm_size=spec.shm_size,
    )
    return RunPlan(run, tuple(create), spec.user.uid if uid == 0 else None)


def stale_image(spec: ImageSpec, labels: Mapping[str, str]) -> str | None:
    """Why the image under ``spec.tag`` is not the one ``spec`` builds, or None.

    Its ``dev.fdl.manifest-hash`` label records the manifest sections it was built
    from (``images``, ``libtorch``, overlays applied); another hash means another
    manifest or overlay made it, and running it would ignore what differs. An image
    without the label was not built by fdl, so nothing can be told (None).
    """
    built = labels.get(MANIFEST_HASH)
    wanted = dict(spec.labels).get(MANIFEST_HASH)
    if not built or not wanted or built == wanted:
        return None
    return (
        f"image {spec.tag} was built from another manifest than {spec.source} makes now "
        f"(its images/libtorch sections: built {built[:19]}, now {wanted[:19]}); running it "
        "would ignore what changed"
    )


def _gpus(spec: ImageSpec, present: bool) -> str | None:
    if spec.gpus == "none":
        return None
    if spec.gpus == "auto":
        cuda = spec.variant is not None and spec.variant.cuda is not None
        return "all" if present and cuda else None
    return spec.gpus


def prepare_mounts(plan: RunPlan) -> None:
    """Create the missing writable mount sources (owned by the container's user)."""
    for directory in plan.create:
        directory.mkdir(parents=True, exist_ok=True)
        if plan.owner is not None:
            os.chown(directory, plan.owner, plan.owner)
