"""The Kubernetes backend (``kind: kubernetes``): a Job, an Indexed Job and its Service, a
PyTorchJob or a JobSet (:mod:`._kube`), created and followed through the ``kubernetes``
client (:mod:`._kube_exec`, imported by it only when a cluster is asked)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from fdl.deploy._backend import DeployBackend, JobInputs
from fdl.deploy._kube import render_kubernetes, to_yaml
from fdl.deploy._kube_exec import (
    OBJECT_NAME,
    RECORD_KINDS,
    kube_cancel,
    kube_check,
    kube_logs,
    kube_state,
    kube_submit,
)
from fdl.deploy._record import JobFile, JobRecord, JobStatus
from fdl.deploy._target import DeployTarget
from fdl.runner import Runner

__all__ = ["BACKEND", "KubernetesBackend"]

# How often --wait asks the API whether the job has ended.
_POLL_SECONDS = 2


class KubernetesBackend(DeployBackend):
    """Kubernetes: pods are pinned to the covered GPUs by node affinity; they get the
    target's mounts only (the project's paths are not the node's)."""

    name = "kubernetes"
    suffix = ".yaml"
    lands_anywhere = False
    carries_profile_mounts = False
    done = "Complete"
    record_ids: Mapping[str, re.Pattern[str]] = dict.fromkeys(RECORD_KINDS, OBJECT_NAME)

    def check_fields(self, manifest: Any, key: str, raw: Mapping[str, Any]) -> None:
        for name in raw.get("pass-env") or ():
            raise manifest.error(
                f"{key}.pass-env",
                "pass-env is for SLURM targets (sbatch exports the submitting environment)",
                hint=f"on Kubernetes read {name} from a Secret: {key}.secret-env: "
                f"{{{name}: SECRET/KEY}}",
            )

    def secret_fix(self, key: str, name: str) -> str:
        secret = name.lower().replace("_", "-")
        return (
            f"create a Secret (kubectl create secret generic {secret} "
            f"--from-literal=value=...) and name it under {key}.secret-env: "
            f"{{{name}: {secret}/value}}"
        )

    def runs_local_images(self, target: DeployTarget) -> bool:
        return False

    def puller(self, target: DeployTarget) -> str:
        return "kubernetes"

    def visible_note(self, target: DeployTarget, spec: str) -> str:
        return (
            f"--gpus {spec}: the device plugin gives each pod {target.gpus_per_node} GPU(s), "
            f"numbered from 0 inside it; CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES={spec} "
            "in the training and probe containers leave the program and the probe those"
        )

    def check(self, target: DeployTarget, runner: Runner) -> list[str]:
        kube_check(target.context)
        return []

    def render(self, target: DeployTarget, job: JobInputs) -> str:
        # The container keeps the image's entrypoint and, without the target's, its CMD.
        given = list(target.args) if target.args is not None else None
        objects = render_kubernetes(
            target,
            image=job.image,
            name=job.job_name,
            args=given,
            allowed=job.allowed,
            probe=job.probe,
        )
        return to_yaml(objects)

    def submit(
        self, target: DeployTarget, job: JobFile, state_dir: Path, runner: Runner
    ) -> JobRecord:
        return kube_submit(target, job, state_dir)

    def status(self, record: JobRecord, runner: Runner, context: str | None) -> JobStatus:
        return JobStatus(kube_state(record, context))

    def logs(
        self, record: JobRecord, runner: Runner, context: str | None, *, follow: bool
    ) -> Iterator[str]:
        return kube_logs(record, context)

    def wait(
        self,
        record: JobRecord,
        runner: Runner,
        context: str | None,
        on_line: Callable[[str], None],
    ) -> str:
        # The pods' logs cannot be followed (logs ignores follow): read once the job has ended.
        while (state := kube_state(record, context)) not in ("Complete", "Failed"):
            time.sleep(_POLL_SECONDS)
        for line in kube_logs(record, context):
            on_line(line)
        return state

    def cancel(self, record: JobRecord, runner: Runner, context: str | None) -> str | None:
        return kube_cancel(record, context)


BACKEND = KubernetesBackend()
