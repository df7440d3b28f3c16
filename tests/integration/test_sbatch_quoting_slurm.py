"""The real sbatch reads each ``#SBATCH`` value fdl writes as fdl meant it, and reads the
lines tests/support/sbatch_grammar.py reads as the grammar says (the property tests of
tests/unit/test_sbatch_grammar.py rest on that reader). Jobs are submitted held and
cancelled: nothing runs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.deploy._slurm import sbatch_directive
from tests.integration.test_deploy_slurm import slurm  # noqa: F401 (the fixture)
from tests.support.sbatch_grammar import sbatch_arguments


@pytest.fixture
def held(tmp_path: Path) -> Iterator:
    """Submit a script of ``#SBATCH`` lines held; the job's name as SLURM keeps it."""
    jobs: list[str] = []

    def submit(*lines: str) -> str:
        """The job's name, or ``error: ...`` when sbatch refused the script."""
        script = tmp_path / f"job{len(jobs)}.sh"
        body = "".join(f"#SBATCH {line}\n" for line in lines)
        script.write_text(f"#!/bin/bash\n{body}#SBATCH --output=/dev/null\ntrue\n")
        done = subprocess.run(
            ["sbatch", "--hold", "--parsable", str(script)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return "error: " + done.stderr.strip()
        job = done.stdout.strip().split(";")[0]
        jobs.append(job)
        shown = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%j"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return shown.stdout.rstrip("\n")

    yield submit
    if jobs:
        subprocess.run(["scancel", *jobs], capture_output=True, timeout=60, check=False)


NAMES = ["plain", "two words", "it's", "a#b", "$HOME", "x;y|z", "100%", "é ü"]


@pytest.mark.usefixtures("slurm")
@pytest.mark.parametrize("name", NAMES)
def test_sbatch_reads_each_job_name_fdl_writes_whole(held, name: str) -> None:
    assert held(sbatch_directive("job-name", name)) == name


@pytest.mark.usefixtures("slurm")
@pytest.mark.parametrize(
    "line",
    ["--job-name=a#b", "--job-name=two words", "--job-name='it''s'", '--job-name="a#b"'],
)
def test_the_grammar_reads_a_line_as_sbatch_does(held, line: str) -> None:
    read = sbatch_arguments(" " + line)
    shown = held(line)
    if len(read) > 1:  # a stray word: sbatch refuses the script
        assert shown == f"error: sbatch: error: Invalid directive found in batch script: {read[1]}"
    else:
        assert shown == read[0].removeprefix("--job-name=")
