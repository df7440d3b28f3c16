"""The readiness gate of `fdl deploy` jobs on the one-node SLURM cluster of
scripts/setup-slurm.sh: the job script runs `fdl probe` (the fdl under test, on the job's
PATH) on the node before the training step, with the node's GPUs spoofed by
FLODL_TESTING_GPU_JSON (exported to the job by sbatch). A node the image's libtorch cannot
run on stops the job before its container starts, with the probe's words and exit 69."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fdl.deploy import DeployTarget, ImageArchs, JobRecord, job_state, plan_deploy, submit_sbatch
from fdl.runner import SubprocessRunner
from tests.conftest import BASE_IMAGE
from tests.integration.test_deploy_slurm import _image_id, _wait_lines, slurm

__all__ = ["slurm"]  # the fixture, used by name

CU130 = ImageArchs(
    "precompiled/cu130",
    "13.0",
    ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
    "2.13.0",
)
GTX1060 = '[{"vendor":"nvidia","arch":"sm_61","vram_mb":6144,"name":"NVIDIA GeForce GTX 1060 6GB"}]'
H100 = '[{"vendor":"nvidia","arch":"sm_90","vram_mb":81559,"name":"NVIDIA H100 80GB HBM3"}]'


@pytest.fixture
def job_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The submitting shell sbatch exports: this fdl first on PATH, fdl's state in tmp."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FDL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)


def _run(tmp_path: Path, **fields: object) -> tuple[JobRecord, list[str], str]:
    runner = SubprocessRunner()
    target = DeployTarget("gate", "slurm", runtime="docker", **fields)  # type: ignore[arg-type]
    plan = plan_deploy(
        target,
        project="cpp-train",
        local_image=BASE_IMAGE,
        archs=CU130,
        entrypoint=[],
        args=["sh", "-c", "echo trained on the node"],
        digest=_image_id(),
    )
    record = submit_sbatch(plan, tmp_path, runner)
    lines = _wait_lines(record, runner)
    done = runner.run(["scontrol", "show", "job", "-o", record.job_id], check=False)
    return record, lines, done.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_a_node_the_image_cannot_run_on_stops_the_job_with_the_probes_words(
    slurm: None, job_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLODL_TESTING_GPU_JSON", GTX1060)
    record, lines, shown = _run(tmp_path)
    text = "\n".join(lines)
    assert job_state(record, SubprocessRunner()) == "FAILED", text
    assert "ExitCode=69:0" in shown, shown
    assert "verdict: NOT READY (1 issue)" in text
    assert (
        "error: the image's libtorch precompiled/cu130 (sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 "
        "compute_120) has no code for GPU 0 (NVIDIA GeForce GTX 1060 6GB, sm_61) of this node"
    ) in text
    assert "stopped before training (exit 69)" in text
    assert "trained on the node" not in text  # the container never started


@pytest.mark.docker
@pytest.mark.slow
def test_a_node_the_image_runs_on_passes_the_gate_and_trains(
    slurm: None, job_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLODL_TESTING_GPU_JSON", H100)
    record, lines, _ = _run(tmp_path)
    text = "\n".join(lines)
    assert job_state(record, SubprocessRunner()) == "COMPLETED", text
    assert "verdict: READY" in text and "1/1 GPUs covered" in text
    assert "trained on the node" in text


@pytest.mark.docker
@pytest.mark.slow
def test_probe_false_trains_without_asking(
    slurm: None, job_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLODL_TESTING_GPU_JSON", GTX1060)
    record, lines, _ = _run(tmp_path, probe=False)
    text = "\n".join(lines)
    assert job_state(record, SubprocessRunner()) == "COMPLETED", text
    assert "trained on the node" in text
    assert "verdict" not in text and "fdl probe" not in Path(record.script).read_text()
