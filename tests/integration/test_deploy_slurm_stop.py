"""On the local one-node SLURM cluster (scripts/setup-slurm.sh, KillWait=5) with
``runtime: docker``: what SLURM ends, ends. `scancel` and a time limit signal only the
docker client of each task; the job script must stop the container itself. A request no
node can meet is refused at submit with SLURM's reason."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.deploy import DeployTarget, JobRecord, cancel_job, job_state, submit_sbatch
from fdl.errors import UsageError
from fdl.runner import SubprocessRunner
from tests.integration.test_deploy_slurm import _image_id, _plan, slurm  # noqa: F401


def _containers(marker: str) -> list[str]:
    """The running containers whose command carries ``marker``, whatever their name."""
    done = subprocess.run(
        ["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Command}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split()[0] for line in done.stdout.splitlines() if marker in line]


def _until(condition, what: str, limit: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    # An upper bound only, so a broken job cannot hang the suite; never a timing check.
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for {what} after {limit:.0f} s")
        time.sleep(0.5)


@pytest.fixture
def sleeper(slurm: None, tmp_path: Path) -> Iterator[tuple[str, Path]]:  # noqa: F811
    marker = f"fdl-stop-test-{uuid.uuid4().hex[:8]}"
    yield marker, tmp_path
    for cid in _containers(marker):  # a failed test leaves nothing behind
        subprocess.run(["docker", "kill", cid], capture_output=True, check=False)


def _submit_sleeper(marker: str, state: Path, **target: object) -> JobRecord:
    runner = SubprocessRunner()
    # PID 1 of the container is a shell that ignores SIGTERM unless --init stands before it.
    command = ["sh", "-c", f"echo started; sleep 600; : {marker}"]
    plan = _plan(DeployTarget("local", "slurm", runtime="docker", **target), command, _image_id())  # type: ignore[arg-type]
    record = submit_sbatch(plan, state, runner)
    _until(lambda: bool(_containers(marker)), "the job's container to start")
    return record


@pytest.mark.docker
def test_cancel_leaves_no_container(sleeper: tuple[str, Path]) -> None:
    marker, state = sleeper
    runner = SubprocessRunner()
    record = _submit_sleeper(marker, state)
    assert cancel_job(record, runner) is None
    _until(lambda: job_state(record, runner) == "CANCELLED", "the job to end")
    # slurmstepd has sent SIGTERM, then SIGKILL after KillWait: nothing is left.
    _until(lambda: not _containers(marker), "the container to go", limit=30)
    assert cancel_job(record, runner) == "CANCELLED"  # a second cancel says it had ended


@pytest.mark.docker
@pytest.mark.slow
def test_a_job_that_reaches_its_time_limit_leaves_no_container(
    sleeper: tuple[str, Path],
) -> None:
    # SLURM counts limits in minutes and checks them every 30 s: about 90 s.
    marker, state = sleeper
    runner = SubprocessRunner()
    record = _submit_sleeper(marker, state, time="1")
    _until(lambda: job_state(record, runner) == "TIMEOUT", "the time limit", limit=240)
    _until(lambda: not _containers(marker), "the container to go", limit=30)


def test_a_request_no_node_can_meet_is_refused_with_slurms_reason(
    slurm: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    for target in (
        DeployTarget("local", "slurm", nodes=2, origin="fdl.yml:4:5"),
        DeployTarget("local", "slurm", cpus_per_task=4096, origin="fdl.yml:4:5"),
    ):
        with pytest.raises(UsageError) as caught:
            submit_sbatch(
                _plan(target, ["true"], "sha256:" + "0" * 64), tmp_path, SubprocessRunner()
            )
        assert "node configuration is not available" in caught.value.message
        assert "fdl.yml:4:5" in (caught.value.hint or "")
        assert "the cluster has 1 node(s): localhost" in (caught.value.hint or "")
        assert not (tmp_path / "local.json").exists()


def _submit_at_once(args: tuple[str, int]) -> str:
    state, _ = args
    target = DeployTarget("local", "slurm")
    plan = _plan(target, ["true"], "sha256:" + "0" * 64)
    plan = type(plan)(**{**plan.__dict__, "text": plan.text.rsplit("srun ", 1)[0] + "true\n"})
    return submit_sbatch(plan, Path(state), SubprocessRunner()).job_id


def test_two_submits_at_once_keep_both_records(slurm: None, tmp_path: Path) -> None:  # noqa: F811
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(2) as pool:
        ids = pool.map(_submit_at_once, [(str(tmp_path), 1), (str(tmp_path), 2)])
    assert len(set(ids)) == 2
    kept = sorted(path.name for path in (tmp_path / "jobs").iterdir())
    assert kept == sorted(f"local-{job_id}.json" for job_id in ids)
    last = json.loads((tmp_path / "local.json").read_text())["job_id"]
    assert last in ids
