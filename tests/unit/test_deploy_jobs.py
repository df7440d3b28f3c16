"""What `fdl deploy` tells a cluster operator about a SLURM job, without a cluster:
every submitted job keeps its record, a request SLURM can never meet is refused at submit
with SLURM's reason, status says why a job waits and what UNKNOWN means, cancel of an
ended job says so, and logs stream a line at a time."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from fdl.deploy import (
    DeployTarget,
    ImageArchs,
    JobRecord,
    cancel_job,
    follow_job,
    follow_output,
    job_status,
    plan_deploy,
    read_record,
    submit_sbatch,
)
from fdl.errors import UsageError
from fdl.runner import Completed
from tests.support.fakes import FakeRunner

CPU = ImageArchs("precompiled/cpu", None, ())


def _plan(target: DeployTarget):  # type: ignore[no-untyped-def]
    return plan_deploy(
        target,
        project="p",
        local_image="p-train:latest",
        archs=CPU,
        entrypoint=[],
        args=[],
        digest="sha256:" + "1" * 64,
    )


def _record(tmp_path: Path, job_id: str = "42") -> JobRecord:
    output = tmp_path / f"fdl-{job_id}.out"
    return JobRecord("lab", "slurm", job_id, "img", str(tmp_path / "lab.sbatch"), str(output))


def test_every_submitted_job_keeps_its_record(tmp_path: Path) -> None:
    ids = iter(["41", "42"])
    runner = FakeRunner(
        {
            ("sbatch", "--test-only"): Completed([], 0),
            ("sbatch", "--parsable"): lambda argv: Completed(argv, 0, next(ids) + "\n"),
            ("scontrol",): Completed([], 1),
        },
        programs={"sbatch": "/usr/bin/sbatch"},
    )
    plan = _plan(DeployTarget("lab", "slurm"))
    first = submit_sbatch(plan, tmp_path, runner)
    second = submit_sbatch(plan, tmp_path, runner)
    assert read_record(tmp_path, "lab") == second  # the last one, as before
    assert read_record(tmp_path, "lab", "41") == first  # and the first is not lost
    assert read_record(tmp_path, "lab", "42") == second
    with pytest.raises(UsageError, match="no job 43"):
        read_record(tmp_path, "lab", "43")
    with pytest.raises(UsageError, match="is not a job id"):
        read_record(tmp_path, "lab", "../lab")


def test_a_request_slurm_can_never_meet_is_refused_at_submit(tmp_path: Path) -> None:
    refused = Completed(
        [], 1, "", "allocation failure: Requested node configuration is not available"
    )
    runner = FakeRunner(
        {
            ("sbatch", "--test-only"): refused,
            ("sinfo",): Completed([], 0, "localhost 2 3000 (null)\n"),
        },
        programs={"sbatch": "/usr/bin/sbatch"},
    )
    target = DeployTarget("lab", "slurm", nodes=2, origin="fdl.yml:9:5")
    with pytest.raises(UsageError) as caught:
        submit_sbatch(_plan(target), tmp_path, runner)
    assert "Requested node configuration is not available" in caught.value.message
    hint = caught.value.hint or ""
    assert "fdl.yml:9:5" in hint and "localhost: 2 CPUs, 3000 MB" in hint
    assert not any(call[:2] == ["sbatch", "--parsable"] for call in runner.calls)
    assert not (tmp_path / "lab.json").exists()


def test_status_says_why_a_job_waits_and_what_unknown_means(tmp_path: Path) -> None:
    record = _record(tmp_path)
    waiting = FakeRunner({("squeue",): Completed([], 0, "PENDING|Resources\n")})
    assert job_status(record, waiting).reason == "Resources"
    gone = FakeRunner(
        {
            ("squeue",): Completed([], 1, "", "Invalid job id specified"),
            ("scontrol",): Completed([], 1, "", "Invalid job id specified"),
            ("sacct",): Completed([], 1, "", "sacct: error: Slurm accounting storage is disabled"),
        }
    )
    found = job_status(record, gone)
    assert found.state == "UNKNOWN"
    assert "accounting is off" in (found.note or "") and record.output in (found.note or "")


def test_cancel_of_an_ended_job_cancels_nothing_and_says_so(tmp_path: Path) -> None:
    runner = FakeRunner(
        {
            ("squeue",): Completed([], 0, ""),
            ("scontrol",): Completed([], 0, "JobId=42 JobState=COMPLETED\n"),
            ("scancel",): Completed([], 0),
        }
    )
    assert cancel_job(_record(tmp_path), runner) == "COMPLETED"
    assert not any(call[0] == "scancel" for call in runner.calls)


def test_logs_stream_a_line_at_a_time(tmp_path: Path) -> None:
    record = _record(tmp_path)
    line = b"x" * 99 + b"\n"
    with Path(record.output).open("wb") as sink:
        for _ in range(200):  # 20 MB
            sink.write(line * 1000)
        sink.write(b"last, without a newline")
    runner = FakeRunner()
    tracemalloc.start()
    try:
        count, last = 0, ""
        for text in follow_output(record, runner, follow=False):
            count, last = count + 1, text
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 200_001 and last == "last, without a newline"
    assert peak < 4 << 20, peak  # not the file's 20 MB


def test_a_line_being_written_is_printed_once_whole(tmp_path: Path) -> None:
    record = _record(tmp_path)
    output = Path(record.output)
    output.write_text("step 1\nstep ")
    states = iter(["RUNNING", "COMPLETED"])

    def squeue(argv: list[str]) -> Completed:
        state = next(states)
        if state == "COMPLETED":
            with output.open("a") as sink:
                sink.write("2\n")
        return Completed(argv, 0, f"{state}|None\n")

    runner = FakeRunner({("squeue",): squeue})
    lines = list(follow_output(record, runner, follow=True, sleep=lambda _: None))
    assert lines == ["step 1", "step 2"]


def test_a_record_naming_another_job_is_refused(tmp_path: Path) -> None:
    record = _record(tmp_path, "41")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "lab-42.json").write_text(json.dumps(record.to_json()))
    with pytest.raises(Exception, match="names job 41"):
        read_record(tmp_path, "lab", "42")


def test_a_pods_log_is_cut_into_lines_as_it_streams() -> None:
    from fdl.deploy._kube_exec import _lines

    chunks = iter([b"step 1\nst", b"ep 2\r\n", b"x" * 10, b"y" * 10, b"\nlast"])
    assert list(_lines(chunks, limit=16)) == [
        "step 1",
        "step 2",
        "x" * 10 + "y" * 6,
        "y" * 4,
        "last",
    ]


def test_following_a_job_slurm_no_longer_knows_ends(tmp_path: Path) -> None:
    record = _record(tmp_path)
    Path(record.output).write_text("step 1\n")
    states = iter(["RUNNING", "UNKNOWN", "RUNNING"] + ["UNKNOWN"] * 50)

    def squeue(argv: list[str]) -> Completed:
        state = next(states)
        if state == "UNKNOWN":  # gone from squeue, scontrol and (accounting off) sacct
            return Completed(argv, 1, "", "Invalid job id specified")
        return Completed(argv, 0, f"{state}|None\n")

    runner = FakeRunner(
        {
            ("squeue",): squeue,
            ("scontrol",): Completed([], 1, "", "Invalid job id specified"),
            ("sacct",): Completed([], 1, "", "sacct: error: Slurm accounting storage is disabled"),
        }
    )
    polls: list[float] = []
    lines = list(follow_output(record, runner, follow=True, sleep=polls.append))
    assert lines == ["step 1"]
    assert len(polls) == 7  # one miss is forgiven (slurmctld busy); five in a row end it


def test_waiting_on_a_slurm_job_follows_its_output_then_gives_its_end_state(
    tmp_path: Path,
) -> None:
    record = _record(tmp_path)
    Path(record.output).write_text("step 1\nstep 2\n")
    runner = FakeRunner({("squeue",): Completed([], 0, "COMPLETED|None\n")})
    seen: list[str] = []
    assert follow_job(record, seen.append, runner=runner) == "COMPLETED"
    assert seen == ["step 1", "step 2"]
