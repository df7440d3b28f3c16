"""Deploying a training image to a SLURM or Kubernetes target (``fdl deploy``).

Plan, then execute::

    from fdl.deploy import load_target, plan_deploy

    target = load_target(manifest, "lab")            # the deploy: section, typed
    plan = plan_deploy(target, project=..., local_image=..., archs=..., entrypoint=[...], args=[])
    print(plan.text)                                  # the sbatch script or the YAML

``plan_deploy`` refuses (before anything is pushed) a target whose GPUs the image's
libtorch binaries cannot run on (:func:`check_placement`). What differs between SLURM
and Kubernetes is each one's backend (:data:`BACKENDS`, :class:`DeployBackend`).
"""

from __future__ import annotations

from fdl._lazy import lazy_attribute

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any


# Where each name lives: a module is imported when one of its names is first asked for
# (`fdl deploy submit` of a SLURM target never loads the Kubernetes modules).
# <lazy-exports> generated from the modules' __all__ by `python -m fdl._lazy_tables --write`
if TYPE_CHECKING:
    from fdl.deploy._backend import BACKENDS, DeployBackend, backend
    from fdl.deploy._build_job import BuildJob, build_job_dir, plan_build_job, read_build_result
    from fdl.deploy._jobs import (
        cancel_of,
        follow_job,
        job_completed,
        job_state_of,
        job_status_of,
        logs_of,
        read_record,
    )
    from fdl.deploy._kube import affinity, render_kubernetes, to_yaml
    from fdl.deploy._kube_exec import kube_check
    from fdl.deploy._layers import (
        OCI_MANIFEST,
        ZSTD_LAYER,
        ZSTD_LEVEL,
        Compression,
        PushedBlob,
        PushResult,
        ZstdPuller,
        ZstdUnavailable,
        choose_compression,
        push_zstd,
        split_reference,
    )
    from fdl.deploy._load import load_target, target_names
    from fdl.deploy._placement import GpuVerdict, ImageArchs, Placement, check_placement, place
    from fdl.deploy._plan import (
        DeployPlan,
        plan_deploy,
        probe_command,
        remote_name,
        runs_local_images,
        unmounted_outputs,
    )
    from fdl.deploy._prepare import (
        Prepared,
        archs_of_image,
        build_for_deploy,
        image_archs,
        prepare,
        push_by_digest,
        push_image,
        state_dir,
    )
    from fdl.deploy._record import JobFile, JobRecord, JobStatus
    from fdl.deploy._runtime import check_runtime
    from fdl.deploy._slurm import launcher_argv, pyxis_image, render_sbatch, sbatch_options
    from fdl.deploy._slurm_exec import (
        FINISHED,
        cancel_job,
        follow_output,
        job_state,
        job_status,
        submit_script,
    )
    from fdl.deploy._submit import (
        Submitted,
        check_registry,
        submit_kubernetes,
        submit_plan,
        submit_sbatch,
        submit_target,
    )
    from fdl.deploy._target import DeployTarget, GpuOffer
_HOMES = {
    "BACKENDS": "_backend",
    "DeployBackend": "_backend",
    "backend": "_backend",
    "BuildJob": "_build_job",
    "build_job_dir": "_build_job",
    "plan_build_job": "_build_job",
    "read_build_result": "_build_job",
    "cancel_of": "_jobs",
    "follow_job": "_jobs",
    "job_completed": "_jobs",
    "job_state_of": "_jobs",
    "job_status_of": "_jobs",
    "logs_of": "_jobs",
    "read_record": "_jobs",
    "affinity": "_kube",
    "render_kubernetes": "_kube",
    "to_yaml": "_kube",
    "kube_check": "_kube_exec",
    "OCI_MANIFEST": "_layers",
    "ZSTD_LAYER": "_layers",
    "ZSTD_LEVEL": "_layers",
    "Compression": "_layers",
    "PushedBlob": "_layers",
    "PushResult": "_layers",
    "ZstdPuller": "_layers",
    "ZstdUnavailable": "_layers",
    "choose_compression": "_layers",
    "push_zstd": "_layers",
    "split_reference": "_layers",
    "load_target": "_load",
    "target_names": "_load",
    "GpuVerdict": "_placement",
    "ImageArchs": "_placement",
    "Placement": "_placement",
    "check_placement": "_placement",
    "place": "_placement",
    "DeployPlan": "_plan",
    "plan_deploy": "_plan",
    "probe_command": "_plan",
    "remote_name": "_plan",
    "runs_local_images": "_plan",
    "unmounted_outputs": "_plan",
    "Prepared": "_prepare",
    "archs_of_image": "_prepare",
    "build_for_deploy": "_prepare",
    "image_archs": "_prepare",
    "prepare": "_prepare",
    "push_by_digest": "_prepare",
    "push_image": "_prepare",
    "state_dir": "_prepare",
    "JobFile": "_record",
    "JobRecord": "_record",
    "JobStatus": "_record",
    "check_runtime": "_runtime",
    "launcher_argv": "_slurm",
    "pyxis_image": "_slurm",
    "render_sbatch": "_slurm",
    "sbatch_options": "_slurm",
    "FINISHED": "_slurm_exec",
    "cancel_job": "_slurm_exec",
    "follow_output": "_slurm_exec",
    "job_state": "_slurm_exec",
    "job_status": "_slurm_exec",
    "submit_script": "_slurm_exec",
    "Submitted": "_submit",
    "check_registry": "_submit",
    "submit_kubernetes": "_submit",
    "submit_plan": "_submit",
    "submit_sbatch": "_submit",
    "submit_target": "_submit",
    "DeployTarget": "_target",
    "GpuOffer": "_target",
}
# </lazy-exports>

__all__ = [
    "BACKENDS",
    "FINISHED",
    "OCI_MANIFEST",
    "ZSTD_LAYER",
    "ZSTD_LEVEL",
    "BuildJob",
    "Compression",
    "DeployBackend",
    "DeployPlan",
    "DeployTarget",
    "GpuOffer",
    "GpuVerdict",
    "ImageArchs",
    "JobFile",
    "JobRecord",
    "JobStatus",
    "Placement",
    "Prepared",
    "PushResult",
    "PushedBlob",
    "Submitted",
    "ZstdPuller",
    "ZstdUnavailable",
    "affinity",
    "archs_of_image",
    "backend",
    "build_for_deploy",
    "build_job_dir",
    "cancel_job",
    "cancel_of",
    "check_placement",
    "check_registry",
    "check_runtime",
    "choose_compression",
    "follow_job",
    "follow_output",
    "image_archs",
    "job_completed",
    "job_state",
    "job_state_of",
    "job_status",
    "job_status_of",
    "kube_check",
    "launcher_argv",
    "load_target",
    "logs_of",
    "place",
    "plan_build_job",
    "plan_deploy",
    "prepare",
    "probe_command",
    "push_by_digest",
    "push_image",
    "push_zstd",
    "pyxis_image",
    "read_build_result",
    "read_record",
    "remote_name",
    "render_kubernetes",
    "render_sbatch",
    "runs_local_images",
    "sbatch_options",
    "split_reference",
    "state_dir",
    "submit_kubernetes",
    "submit_plan",
    "submit_sbatch",
    "submit_script",
    "submit_target",
    "target_names",
    "to_yaml",
    "unmounted_outputs",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, globals(), name)
