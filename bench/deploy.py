"""Seconds from `submit` (sbatch --parsable of fdl's script) to the job running and to its
tasks' first output, on the local one-node SLURM cluster (scripts/setup-slurm.sh), with
the tasks running the test base image through docker (2 tasks, as a DDP job would).

Not measured here: pushed bytes with gzip vs zstd layers (no registry was set up in the
time this was written; see the issue's report).

Run: python bench/deploy.py [--runs 5] [--image fdl-test/debian:bookworm]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import print_table
from fdl.deploy import (
    FINISHED,
    DeployTarget,
    ImageArchs,
    job_state,
    plan_deploy,
    submit_sbatch,
)
from fdl.runner import SubprocessRunner


def one_run(image_id: str, state: Path) -> tuple[float, float, float]:
    runner = SubprocessRunner()
    target = DeployTarget("bench", "slurm", tasks_per_node=2)
    plan = plan_deploy(
        target,
        project="bench",
        local_image="bench:latest",
        archs=ImageArchs("precompiled/cpu", None, ()),
        entrypoint=[],
        args=["sh", "-c", "echo rank=$RANK"],
        digest=image_id,
    )
    start = time.perf_counter()
    record = submit_sbatch(plan, state, runner)
    submitted = time.perf_counter() - start
    running = first_output = 0.0
    output = Path(record.output)
    while True:
        now = time.perf_counter() - start
        current = job_state(record, runner)
        if not running and current in ("RUNNING", *FINISHED):
            running = now
        if not first_output and output.is_file() and "rank=" in output.read_text():
            first_output = now
        if current in FINISHED:
            break
        time.sleep(0.05)
    return submitted, running, first_output or time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default="fdl-test/debian:bookworm")
    args = parser.parse_args()
    image_id = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", args.image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as state:
        results = [one_run(image_id, Path(state)) for _ in range(args.runs)]
    for label, index in (("sbatch returned", 0), ("job RUNNING", 1), ("first task output", 2)):
        values = [r[index] for r in results]
        rows.append(
            (label, f"{statistics.median(values):.2f}", f"{min(values):.2f}", f"{max(values):.2f}")
        )
    print(f"local SLURM, {args.runs} runs, 2 tasks via docker ({args.image})")
    print_table(("from submit to", "median s", "min s", "max s"), rows)


if __name__ == "__main__":
    main()
