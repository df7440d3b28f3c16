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
from fdl.deploy._record import JobRecord, JobStatus
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
