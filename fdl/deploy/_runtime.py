"""Checks of a SLURM target's container runtime, made on the submitting host before the
image is built or pushed (a job that cannot start its container fails only once it runs).

What each runtime does with SLURM's signals, and so what ``cancel`` guarantees:

- pyxis/enroot: a SPANK plugin; slurmstepd starts the container in the task itself
  (``task_init``), so its processes are the job step's own (no daemon) and SLURM signals
  and kills them with the step. srun loads the plugin's options on the submitting host
  too (``SPANK: appending plugin option "container-image"``, NVIDIA/pyxis#42), which is
  what ``srun --help`` shows (NVIDIA/pyxis#4).
- apptainer: the same (``apptainer run`` execs its starter in the step; no daemon).
- docker, podman: the container is the daemon's (dockerd) or conmon's child, outside the
  step; the job script names it and stops it on the way out (``templates/deploy``).
"""

from __future__ import annotations

from fdl.deploy._target import DeployTarget
from fdl.errors import EnvironmentProblem
from fdl.runner import Runner

__all__ = ["check_runtime"]


def check_runtime(target: DeployTarget, runner: Runner) -> list[str]:
    """Refuse a runtime this host shows cannot work; return warnings about what it cannot
    see from here (a runtime the compute nodes may have and this host lacks).

    Raises:
        EnvironmentProblem: no sbatch; pyxis without ``srun --container-image``.
    """
    if runner.which("sbatch") is None or runner.which("srun") is None:
        raise EnvironmentProblem(
            "`sbatch` and `srun` were not found on PATH (fdl submits SLURM jobs from a login node)",
            hint="run fdl where the SLURM client tools are installed, or `fdl deploy render` "
            "and copy the script there",
        )
    where = f"at {target.origin}" if target.origin else "in the target"
    if target.runtime == "pyxis":
        done = runner.run(["srun", "--help"], check=False)
        if "--container-image" not in done.stdout + done.stderr:
            raise EnvironmentProblem(
                f"target {target.name!r} runs its image with pyxis, but srun here does not "
                "know --container-image (the pyxis SPANK plugin is not loaded: plugstack.conf); "
                "the job's `srun --container-image` would fail once it started",
                hint=f"set `runtime:` to apptainer, podman or docker ({where}), or have pyxis "
                "installed (check: srun --help | grep container-image)",
            )
        return []
    if runner.which(target.runtime) is None:
        return [
            f"`{target.runtime}` is not on this host's PATH: the job fails unless the compute "
            f"nodes have it (runtime: {target.runtime} {where})"
        ]
    return []
