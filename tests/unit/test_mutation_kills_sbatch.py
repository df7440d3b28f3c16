"""What the sbatch generator writes for each kind of image reference and path: behaviours the
mutation run (scripts/mutation.py) found that no unit test held."""

from __future__ import annotations

import pytest

from fdl.deploy._slurm import (
    launcher_argv,
    pyxis_image,
    render_sbatch,
    sbatch_options,
    slurm_literal,
)
from fdl.deploy._target import DeployTarget, GpuOffer


@pytest.mark.parametrize(
    ("reference", "enroot"),
    [
        ("ghcr.io/team/train:1", "ghcr.io#team/train:1"),
        ("localhost/train:1", "localhost#train:1"),
        ("host:5000/train:1", "host:5000#train:1"),
        ("team/train:1", "team/train:1"),  # Docker Hub: no registry host to separate
        ("train:1", "train:1"),
    ],
)
def test_pyxis_separates_the_registry_host_with_a_hash(reference: str, enroot: str) -> None:
    assert pyxis_image(reference) == enroot


def test_a_path_keeps_its_percent_signs_from_sbatchs_patterns() -> None:
    assert slurm_literal("/data/%j/run") == "/data/%%j/run"
    assert slurm_literal("/data/run") == "/data/run"


def test_a_gpu_named_by_its_product_is_asked_for_by_its_gres_type() -> None:
    h100 = GpuOffer("9.0", type="h100", product="NVIDIA-H100-80GB-HBM3")
    for named in ("h100", "NVIDIA-H100-80GB-HBM3"):
        target = DeployTarget("t", "slurm", gpus_per_node=4, gpus=(h100,), gpu_type=named)
        assert "--gres=gpu:h100:4" in sbatch_options(target, "job")


@pytest.mark.parametrize(("gpus", "nv"), [(0, False), (1, True), (2, True)])
def test_apptainer_gets_the_gpus_only_when_the_job_asks_for_them(gpus: int, nv: bool) -> None:
    target = DeployTarget("t", "slurm", gpus_per_node=gpus, runtime="apptainer")
    assert ("--nv" in launcher_argv(target)) is nv


def test_pyxis_gets_container_mounts_only_when_there_are_some() -> None:
    def script(mounts: tuple[str, ...]) -> str:
        target = DeployTarget("t", "slurm", runtime="pyxis")
        return render_sbatch(
            target, image="reg.io/t@sha256:" + "a" * 64, job_name="j", command=["x"], mounts=mounts
        )

    assert "--container-mounts" not in script(())
    assert "--container-mounts=/data:/data" in script(("/data:/data",))
