"""The sbatch scripts and Kubernetes objects ``fdl deploy render`` writes, byte for byte,
for every runtime and controller, and the keys of the plan's ``--json`` (rewrite with
FDL_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json

import pytest

from fdl.deploy import DeployTarget, GpuOffer, ImageArchs, plan_deploy
from tests.support.golden import assert_golden

DIGEST = "sha256:" + "ab" * 32
CU130 = ImageArchs(
    "precompiled/cu130",
    "13.0",
    ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
    "2.13.0",
)
H100 = GpuOffer("9.0", type="h100", product="NVIDIA-H100-80GB-HBM3", driver="580.65")
L4 = GpuOffer("8.9", type="l4", product="NVIDIA-L4", driver="580.65")

_SLURM = {
    "nodes": 2,
    "gpus_per_node": 4,
    "gpu_type": "h100",
    "gpus": (H100, L4),
    "partition": "gpu",
    "account": "ml",
    "time": "04:00:00",
    "memory": "64G",
    "cpus_per_task": 8,
    "sbatch": ("--exclusive",),
    "env": (("NCCL_DEBUG", "INFO"),),
    "pass_env": ("HF_TOKEN",),
    "mounts": ("/scratch/data:/workspace/data:ro",),
    "registry": "127.0.0.1:5000/acme",
}
_KUBE = {
    "nodes": 3,
    "gpus_per_node": 1,
    "gpus": (H100, L4),
    "namespace": "ml",
    "registry": "ghcr.io/acme",
    "image_pull_secrets": ("regcred",),
    "service_account": "trainer",
    "secret_env": (("HF_TOKEN", "hf-token/value"),),
    "tolerations": ((("effect", "NoSchedule"), ("key", "nvidia.com/gpu"), ("operator", "Exists")),),
    "mounts": ("/scratch/data:/workspace/data:ro",),
}
CASES: dict[str, tuple[str, dict[str, object]]] = {
    "slurm-docker.sbatch": ("slurm", {**_SLURM, "runtime": "docker"}),
    "slurm-podman.sbatch": ("slurm", {**_SLURM, "runtime": "podman"}),
    "slurm-apptainer.sbatch": ("slurm", {**_SLURM, "runtime": "apptainer"}),
    "slurm-pyxis.sbatch": ("slurm", {**_SLURM, "runtime": "pyxis"}),
    "slurm-cpu.sbatch": ("slurm", {"tasks_per_node": 2}),
    # `probe: false`: the script as it was before the readiness gate
    "slurm-docker-no-probe.sbatch": ("slurm", {**_SLURM, "runtime": "docker", "probe": False}),
    "kube-job-one.yaml": ("kubernetes", {**_KUBE, "nodes": 1}),
    "kube-job-indexed.yaml": ("kubernetes", _KUBE),
    "kube-pytorchjob.yaml": ("kubernetes", {**_KUBE, "controller": "pytorchjob"}),
    "kube-jobset.yaml": ("kubernetes", {**_KUBE, "controller": "jobset"}),
    "kube-job-probe.yaml": ("kubernetes", {**_KUBE, "probe_image": "ghcr.io/acme/fdl:0.9"}),
}


def _plan(name: str):  # type: ignore[no-untyped-def]
    kind, fields = CASES[name]
    target = DeployTarget("lab", kind, origin="fdl.yml:2:3", **fields)  # type: ignore[arg-type]
    return plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=CU130 if target.gpus_per_node else ImageArchs("precompiled/cpu", None, ()),
        entrypoint=["/opt/app/bin/train"],
        args=["--steps", "2", "--out", "/workspace/out"],
        digest=DIGEST,
        mounts=("/home/u/proj/runs:/workspace/runs",),
    )


@pytest.mark.parametrize("name", CASES)
def test_rendered_job_is_byte_for_byte_the_same(name: str) -> None:
    plan = _plan(name)
    assert_golden(f"deploy/{name}", plan.text)
    summary = {k: v for k, v in plan.to_json().items() if k != "text"}
    assert_golden(f"deploy/{name}.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
