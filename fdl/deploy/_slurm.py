"""The sbatch script of a SLURM target (pure; template ``templates/deploy/sbatch.sh.j2``).

The rendezvous environment is what libtorch/floDl DDP reads: ``MASTER_ADDR`` (the first host
of ``scontrol show hostnames $SLURM_JOB_NODELIST``), ``MASTER_PORT``, ``WORLD_SIZE``, and per
task ``RANK`` from ``SLURM_PROCID`` and ``LOCAL_RANK`` from ``SLURM_LOCALID``.
"""

from __future__ import annotations

from fdl._assets import asset_dir, template_environment
from fdl._grammar import quoted, sbatch_directive
from fdl.deploy._target import DeployTarget

__all__ = [
    "PROBE_REFUSED",
    "launcher_argv",
    "pyxis_image",
    "render_sbatch",
    "sbatch_directive",
    "sbatch_options",
    "slurm_literal",
]

# The job's exit status when `fdl probe` found a node not ready (sysexits' EX_UNAVAILABLE):
# apart from the program's own failures, and from what SLURM reports of a killed job.
PROBE_REFUSED = 69

# Variables each runtime passes into the container (docker/podman need them named).
_RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")


def pyxis_image(reference: str) -> str:
    """enroot's form: the registry host is separated by ``#`` (``host:5000#ns/name@sha256:..``)."""
    first, sep, rest = reference.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return reference


def slurm_literal(path: str) -> str:
    """``path`` with sbatch's filename patterns (``%j``, ``%x``...) kept literal."""
    return path.replace("%", "%%")


def sbatch_options(target: DeployTarget, job_name: str) -> list[str]:
    """The ``#SBATCH`` options, in a fixed order, each quoted or refused
    (:func:`sbatch_directive`)."""
    pairs: list[tuple[str, object]] = [
        ("job-name", job_name),
        ("nodes", target.nodes),
        ("ntasks-per-node", target.tasks_per_node),
    ]
    if target.gpus_per_node:
        if target.gpu_type:
            gres = next(g.type for g in target.gpus if target.gpu_type in (g.type, g.product))
            pairs.append(("gres", f"gpu:{gres or target.gpu_type}:{target.gpus_per_node}"))
        else:
            pairs.append(("gpus-per-node", target.gpus_per_node))
    if target.cpus_per_task:
        pairs.append(("cpus-per-task", target.cpus_per_task))
    if target.memory:
        pairs.append(("mem", target.memory))
    for key in ("time", "partition", "account", "qos"):
        value = getattr(target, key)
        if value:
            pairs.append((key, value))
    pairs.append(("output", target.output))
    return [*(sbatch_directive(k, v) for k, v in pairs), *target.sbatch]


def _mount_flags(mounts: tuple[str, ...], flag: str) -> list[str]:
    return [part for mount in mounts for part in (flag, mount)]


def launcher_argv(target: DeployTarget, mounts: tuple[str, ...] = ()) -> list[str]:
    """The container launcher one task runs (the image and its arguments follow).

    ``$IMAGE`` and the rendezvous variables are expanded by the task's shell. ``mounts``
    (``/abs/source:/target[:ro]``, the image profile's) come before the target's own.
    docker and podman run with ``--init`` (the program, not an init that ignores them,
    gets the signals ``docker stop`` sends); the script adds ``--name``.
    """
    gpus = target.gpus_per_node > 0
    env_names = [*_RENDEZVOUS, *(name for name, _ in target.env), *target.pass_env]
    if target.visible is not None:  # fdl --gpus: the masks each task picks (sbatch.sh.j2)
        env_names += ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
    every_mount = (*mounts, *target.mounts)
    if target.runtime == "apptainer":
        argv = ["apptainer", "run"] + (["--nv"] if gpus else [])
        argv += _mount_flags(every_mount, "--bind")
        return [*argv, "docker://$IMAGE"]
    # docker / podman: host network so MASTER_ADDR:MASTER_PORT reaches the rank 0 task.
    argv = [target.runtime, "run", "--rm", "--init", "--network=host", "--ipc=host"]
    if gpus:
        argv += (
            ["--gpus", "all"] if target.runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        )
    argv += _mount_flags(every_mount, "--volume")
    for name in env_names:
        argv += ["--env", name]
    return [*argv, "$IMAGE"]


def render_sbatch(
    target: DeployTarget,
    *,
    image: str,
    job_name: str,
    command: list[str],
    mounts: tuple[str, ...] = (),
    probe: tuple[str, ...] = (),
) -> str:
    """The sbatch script for ``target`` running ``image`` (a reference by digest).

    Args:
        target: The SLURM target.
        image: ``registry/name@sha256:...``.
        job_name: The SLURM job name.
        command: The arguments after the image (docker, podman, apptainer: the program's
            arguments, the entrypoint runs; pyxis: the whole command, entrypoint first).
        mounts: The image profile's mounts, sources absolute (the cluster shares the
            project's filesystem); the target's ``mounts:`` follow.
        probe: ``fdl probe ...``, run on every node before the training step (empty: none).
    """
    launcher = launcher_argv(target, mounts)
    if target.runtime in ("docker", "podman"):
        launcher = launcher[2:]  # the script runs `<runtime> run --name ...` itself
    words = [_launcher_word(w) for w in launcher]
    every_mount = (*mounts, *target.mounts)
    env = template_environment(asset_dir("templates") / "deploy")
    return env.get_template("sbatch.sh.j2").render(
        target=target.name,
        runtime=target.runtime,
        options=sbatch_options(target, job_name),
        image=_word(image),
        master_port=target.master_port,
        env=[(name, _word(value)) for name, value in target.env],
        pass_env=list(target.pass_env),
        mounts=_word(",".join(every_mount)) if every_mount else "",
        launcher=" ".join(words),
        command=" ".join(_word(word) for word in command),
        probe=" ".join(_word(word) for word in probe[1:]),
        probe_refused=PROBE_REFUSED,
        gpus=",".join(str(i) for i in target.visible) if target.visible is not None else "",
        # fdl --gpus: the probe judges the GPUs the tasks will see (fdl_gpus, in the script)
        probe_wrap="bash -c 'fdl_gpus && exec \"$@\"' fdl-probe " if target.visible else "",
    )


def _word(word: str) -> str:
    return quoted("shell", word, what="a word", source="the job script")


def _launcher_word(word: str) -> str:
    # Inside the task's single-quoted `bash -c` only "$@" is expanded; the launcher's
    # words are arguments of it, expanded by the batch shell where $IMAGE is set.
    if word == "$IMAGE":
        return '"$IMAGE"'
    if word == "docker://$IMAGE":
        return '"docker://$IMAGE"'
    return _word(word)
