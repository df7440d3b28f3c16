"""The SLURM answers the unit tests fake, held to the real cluster (issue 46): one job's
life (held, cancelled, gone) read by fdl's job_status and cancel_job, through FakeRunner
answering as tests/unit/test_deploy_jobs.py's fakes do, and through the real squeue,
scontrol, sacct and scancel of scripts/setup-slurm.sh's cluster. Jobs are submitted held:
nothing runs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from fdl.deploy import cancel_job
from fdl.deploy._jobs import JobRecord
from fdl.deploy._slurm_exec import job_status
from fdl.runner import Completed, Runner, SubprocessRunner
from tests.integration.test_deploy_slurm import slurm  # noqa: F401 (the fixture)
from tests.support.fakes import FakeRunner

GONE = "999999"  # a job id the cluster never gave (it counts from 1)


class Recording:
    """A runner that records the programs it ran, around another."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], **kw: Any) -> Completed:
        self.calls.append([str(a) for a in argv])
        return self.inner.run(argv, **kw)


class FakeSlurm:
    """One held job, as the unit tests' FakeRunner answers describe SLURM 22.05."""

    def __init__(self, job_id: str) -> None:
        self.job_id, self.state = job_id, "PENDING"
        self.runner = FakeRunner(
            {
                ("squeue",): self._squeue,
                ("scontrol",): self._scontrol,
                ("sacct",): Completed(
                    [], 1, "", "sacct: error: Slurm accounting storage is disabled"
                ),
                ("scancel",): self._scancel,
            }
        )

    def _known(self, argv: list[str]) -> bool:
        return self.job_id in argv

    def _squeue(self, argv: list[str]) -> Completed:
        if not self._known(argv):
            return Completed(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")
        queued = "PENDING|JobHeldUser\n" if self.state == "PENDING" else ""
        return Completed(argv, 0, queued)

    def _scontrol(self, argv: list[str]) -> Completed:
        if not self._known(argv):
            return Completed(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")
        return Completed(argv, 0, f"JobId={self.job_id} JobName=h.sh JobState={self.state}\n")

    def _scancel(self, argv: list[str]) -> Completed:
        self.state = "CANCELLED"
        return Completed(argv, 0)


@pytest.fixture(params=["real SLURM", "FakeRunner"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Recording, str]]:
    """A runner and the id of a held job it knows."""
    if request.param == "FakeRunner":
        yield Recording(FakeSlurm("41").runner), "41"
        return
    request.getfixturevalue("slurm")
    script = tmp_path / "h.sh"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\ntrue\n")
    done = subprocess.run(
        ["sbatch", "--hold", "--parsable", str(script)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    job = done.stdout.strip().split(";")[0]
    yield Recording(SubprocessRunner()), job
    subprocess.run(["scancel", job], capture_output=True, timeout=60, check=False)


def _record(job_id: str, tmp_path: Path) -> JobRecord:
    return JobRecord("lab", "slurm", job_id, "img", str(tmp_path / "h.sh"), "/dev/null")


def test_a_held_job_waits_then_is_cancelled_once(cluster, tmp_path: Path) -> None:
    runner, job = cluster
    record = _record(job, tmp_path)
    waiting = job_status(record, runner)  # type: ignore[arg-type]
    assert (waiting.state, waiting.reason) == ("PENDING", "JobHeldUser")
    assert cancel_job(record, runner) is None  # type: ignore[arg-type]
    assert job_status(record, runner).state == "CANCELLED"  # type: ignore[arg-type]
    assert cancel_job(record, runner) == "CANCELLED"  # type: ignore[arg-type]
    assert [c for c in runner.calls if c[0] == "scancel"] == [["scancel", job]]  # once


def test_a_job_slurm_never_knew_is_unknown_with_the_reason(cluster, tmp_path: Path) -> None:
    runner, _ = cluster
    found = job_status(_record(GONE, tmp_path), runner)  # type: ignore[arg-type]
    assert found.state == "UNKNOWN"
    assert "accounting is off on this cluster" in (found.note or "")
    assert [c[0] for c in runner.calls] == ["squeue", "scontrol", "sacct"]
