"""The SLURM backend (``kind: slurm``): an sbatch script (:mod:`._slurm`), submitted and
followed with SLURM's tools (:mod:`._slurm_exec`), after the runtime's checks
(:mod:`._runtime`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fdl.deploy._backend import DeployBackend, JobInputs
from fdl.deploy._record import JobFile, JobRecord, JobStatus
from fdl.deploy._runtime import check_runtime
from fdl.deploy._slurm import pyxis_image, render_sbatch
from fdl.deploy._slurm_exec import (
    JOB_ID,
    cancel_job,
    follow_output,
    job_status,
    submit_script,
)
from fdl.deploy._target import DeployTarget
from fdl.runner import Runner

__all__ = ["BACKEND", "SlurmBackend"]


class SlurmBackend(DeployBackend):
    """SLURM: a job may land on any GPU it asks for; the nodes share the project's files.
    ``wait`` is the protocol's: the output file followed as it grows, then the state."""

    name = "slurm"
    suffix = ".sbatch"
    lands_anywhere = True
    carries_profile_mounts = True
    done = "COMPLETED"
    record_ids: Mapping[str, re.Pattern[str]] = {"slurm": JOB_ID}

    def check_fields(self, manifest: Any, key: str, raw: Mapping[str, Any]) -> None:
        if raw.get("secret-env"):
            raise manifest.error(
                f"{key}.secret-env",
                "secret-env names a Kubernetes Secret; this is a SLURM target",
                hint=f"list the variables under {key}.pass-env and export them before "
                "`fdl deploy submit`",
            )

    def secret_fix(self, key: str, name: str) -> str:
        return (
            f"list {name} under {key}.pass-env and export it before `fdl deploy submit` "
            "(sbatch passes it to the job; it is never written into the script)"
        )

    def runs_local_images(self, target: DeployTarget) -> bool:
        return target.runtime in ("docker", "podman")

    def puller(self, target: DeployTarget) -> str:
        return target.runtime

    def visible_note(self, target: DeployTarget, spec: str) -> str:
        return (
            f"--gpus {spec}: SLURM's gres gives each task the job's {target.gpus_per_node} "
            f"GPU(s) of its node (it sets CUDA_VISIBLE_DEVICES); the tasks' programs and the "
            f"probe see GPU(s) {spec} by position within those (fdl picks them from SLURM's "
            "mask, and HIP_VISIBLE_DEVICES alike), not the node's own numbering"
        )

    def check(self, target: DeployTarget, runner: Runner) -> list[str]:
        return check_runtime(target, runner)

    def render(self, target: DeployTarget, job: JobInputs) -> str:
        program_args = list(target.args) if target.args is not None else list(job.args)
        pyxis = target.runtime == "pyxis"  # pyxis runs the command: the entrypoint first
        return render_sbatch(
            target,
            image=pyxis_image(job.image) if pyxis else job.image,
            job_name=job.job_name,
            command=[*job.entrypoint, *program_args] if pyxis else program_args,
            mounts=job.mounts,
            probe=job.probe,
        )

    def submit(
        self, target: DeployTarget, job: JobFile, state_dir: Path, runner: Runner
    ) -> JobRecord:
        return submit_script(target, job, state_dir, runner)

    def status(self, record: JobRecord, runner: Runner, context: str | None) -> JobStatus:
        return job_status(record, runner)

    def logs(
        self, record: JobRecord, runner: Runner, context: str | None, *, follow: bool
    ) -> Iterator[str]:
        return follow_output(record, runner, follow=follow)

    def cancel(self, record: JobRecord, runner: Runner, context: str | None) -> str | None:
        return cancel_job(record, runner)


BACKEND = SlurmBackend()
