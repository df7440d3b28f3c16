"""The record ``fdl deploy submit`` leaves in ``.fdl/deploy/<target>.json``, read back by
status, logs and cancel: anything but a record fdl wrote is refused with the fix (it was
an internal error), and a job id that is not one cannot reach ``scancel``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fdl.deploy import JobRecord, cancel_of, read_record
from fdl.errors import EnvironmentProblem, UsageError
from fdl.runner import Completed
from tests.support.fakes import FakeRunner

GOOD = {
    "target": "lab",
    "kind": "slurm",
    "job_id": "42",
    "image": "127.0.0.1:5000/acme/train@sha256:" + "a" * 64,
    "script": "/p/.fdl/deploy/lab.sbatch",
    "output": "/p/fdl-train-42.out",
}


def _write(state: Path, content: bytes | str) -> None:
    state.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    (state / "lab.json").write_bytes(data)


def test_a_record_fdl_wrote_reads_back(tmp_path: Path) -> None:
    _write(tmp_path, json.dumps(GOOD))
    assert read_record(tmp_path, "lab") == JobRecord(**GOOD)
    for kind, job_id in (("slurm", "42_7"), ("slurm", "42+1"), ("kubernetes-jobset", "t-1a2b")):
        _write(tmp_path, json.dumps({**GOOD, "kind": kind, "job_id": job_id}))
        assert read_record(tmp_path, "lab").job_id == job_id


def test_no_record_is_a_usage_error_naming_submit(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        read_record(tmp_path, "lab")
    assert caught.value.hint == "submit one: fdl deploy submit lab"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{bad", "Expecting property name"),
        ("[]", "not a JSON object"),
        ('{"target": "lab"}', "no text for kind, job_id, image, script, output"),
        (json.dumps({**GOOD, "job_id": 42}), "no text for job_id"),
        (b"\xff\xfe", "not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "more than 65536"),
        ("[" * 30_000 + "]" * 30_000, "recursion"),
        (json.dumps({**GOOD, "kind": "lsf"}), "unknown kind 'lsf'"),
        (json.dumps({**GOOD, "job_id": "--user=root"}), "'--user=root' is not a slurm job id"),
        (json.dumps({**GOOD, "kind": "kubernetes", "job_id": "A b"}), "not a kubernetes job id"),
    ],
)
def test_anything_else_is_refused_with_the_fix(tmp_path: Path, content: str, reason: str) -> None:
    _write(tmp_path, content)
    with pytest.raises(EnvironmentProblem) as caught:
        read_record(tmp_path, "lab")
    assert reason in str(caught.value)
    assert "is not a record of a job fdl submitted to 'lab'" in str(caught.value)
    assert "fdl deploy submit lab" in (caught.value.hint or "")


def test_a_fifo_or_a_directory_is_refused_without_hanging(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "lab.json")
    with pytest.raises(EnvironmentProblem, match="FIFO"):
        read_record(tmp_path, "lab")
    (tmp_path / "lab.json").unlink()
    (tmp_path / "lab.json").mkdir()
    with pytest.raises(EnvironmentProblem, match="directory"):
        read_record(tmp_path, "lab")


def test_an_edited_job_id_never_reaches_scancel(tmp_path: Path) -> None:
    runner = FakeRunner(
        {("scancel",): Completed([], 0, ""), ("squeue",): Completed([], 0, "RUNNING|None\n")}
    )
    _write(tmp_path, json.dumps({**GOOD, "job_id": "-u root"}))
    with pytest.raises(EnvironmentProblem):
        cancel_of(read_record(tmp_path, "lab"), runner)
    assert runner.calls == []
    _write(tmp_path, json.dumps(GOOD))
    cancel_of(read_record(tmp_path, "lab"), runner)
    assert [call[:2] for call in runner.calls if call[0] == "scancel"] == [["scancel", "42"]]
