"""fdl deploy against the one-node SLURM cluster of scripts/setup-slurm.sh (real sbatch,
squeue, scontrol, scancel; tasks run the test base image through docker)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fdl.deploy import (
    FINISHED,
    DeployTarget,
    ImageArchs,
    cancel_job,
    follow_output,
    job_state,
    plan_deploy,
    submit_sbatch,
)
from fdl.errors import UsageError
from fdl.runner import SubprocessRunner
from tests.conftest import BASE_IMAGE
from tests.support.machine import skip_or_fail

CPU = ImageArchs("precompiled/cpu", None, ())


def _slurm_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "no sbatch on PATH (bash scripts/setup-slurm.sh installs a one-node cluster)"
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip().startswith(
        ("idle", "mixed", "allocated", "completing")
    ):
        return f"the local SLURM cluster is not up ({done.stdout.strip() or done.stderr.strip()})"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = _slurm_problem()
    if problem is not None:
        skip_or_fail("slurm", problem)  # FDL_REQUIRE_ALL=1 or FDL_REQUIRE_SLURM=1: a failure


def _image_id() -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", BASE_IMAGE],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _plan(target: DeployTarget, command: list[str], digest: str):  # type: ignore[no-untyped-def]
    return plan_deploy(
        target,
        project="cpp-train",
        local_image=BASE_IMAGE,
        archs=CPU,
        entrypoint=[],
        args=command,
        digest=digest,
    )


def _wait_lines(record, runner) -> list[str]:  # type: ignore[no-untyped-def]
    return list(follow_output(record, runner, follow=True, poll=0.2))


@pytest.mark.docker
@pytest.mark.slow
def test_two_tasks_see_their_rank_world_size_and_master(slurm: None, tmp_path: Path) -> None:
    runner = SubprocessRunner()
    target = DeployTarget("local", "slurm", tasks_per_node=2, env=(("GREETING", "hi"),))
    command = [
        "sh",
        "-c",
        'echo "rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT $GREETING"',
    ]
    plan = _plan(target, command, _image_id())
    record = submit_sbatch(plan, tmp_path, runner)
    lines = _wait_lines(record, runner)
    assert job_state(record, runner) == "COMPLETED", lines
    ranks = sorted(line for line in lines if line.startswith("rank="))
    assert ranks == [
        "rank=0 local=0 world=2 master=localhost:29500 hi",
        "rank=1 local=1 world=2 master=localhost:29500 hi",
    ], lines
    assert (tmp_path / "local.json").is_file() and (tmp_path / "local.sbatch").is_file()


def test_a_bad_partition_is_an_fdl_error_with_the_fix(slurm: None, tmp_path: Path) -> None:
    target = DeployTarget("local", "slurm", partition="nosuch", origin="fdl.yml:3:5")
    plan = _plan(target, ["true"], "sha256:" + "0" * 64)
    with pytest.raises(UsageError) as caught:
        submit_sbatch(plan, tmp_path, SubprocessRunner())
    assert "(partition)" in caught.value.message
    assert "sinfo -s" in (caught.value.hint or "") and "fdl.yml:3:5" in (caught.value.hint or "")


def test_submit_status_cancel(slurm: None, tmp_path: Path) -> None:
    # No container: the job's own shell sleeps, so this stays quick and needs no docker.
    runner = SubprocessRunner()
    target = DeployTarget("local", "slurm", runtime="docker")
    plan = _plan(target, [], "sha256:" + "0" * 64)
    script = plan.text.rsplit("srun ", 1)[0] + "sleep 300\n"
    plan = type(plan)(**{**plan.__dict__, "text": script})
    record = submit_sbatch(plan, tmp_path, runner)
    assert job_state(record, runner) in ("PENDING", "CONFIGURING", "RUNNING")
    cancel_job(record, runner)
    states = set()
    for _ in range(100):
        states.add(job_state(record, runner))
        if states & FINISHED:
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert "CANCELLED" in states
