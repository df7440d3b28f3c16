"""Seconds from `submit` (sbatch --parsable of fdl's script) to the job running and to its
tasks' first output, on the local one-node SLURM cluster (scripts/setup-slurm.sh), with
the tasks running the test base image through docker (2 tasks, as a DDP job would).

Also the bytes a push would send for an image's layers compressed with gzip (level 6, what
`docker push` uses: Go's default) and with zstd (level 3, BuildKit's default for
`compression=zstd`). Docker 20.10 here has no buildx, so BuildKit cannot push zstd layers
itself: the layers of `docker save` are compressed by this script instead (gzip module and
the zstd CLI), which is what each pushed blob would be.

Run: python bench/deploy.py [--runs 5] [--image fdl-test/debian:bookworm] [--layers IMAGE]
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


def layer_bytes(image: str) -> tuple[int, int, int, int]:
    """(layers, raw bytes, gzip bytes, zstd bytes) of the image's layers."""
    import gzip
    import tarfile

    raw = gz = zst = count = 0
    with tempfile.TemporaryDirectory() as work:
        archive = Path(work) / "image.tar"
        subprocess.run(["docker", "save", "-o", str(archive), image], check=True)
        with tarfile.open(archive) as outer:
            for member in outer.getmembers():
                if not member.name.endswith("layer.tar"):
                    continue
                handle = outer.extractfile(member)
                assert handle is not None
                data = handle.read()
                count += 1
                raw += len(data)
                gz += len(gzip.compress(data, compresslevel=6))
                zst += len(
                    subprocess.run(
                        ["zstd", "-3", "-q", "-c"], input=data, capture_output=True, check=True
                    ).stdout
                )
    return count, raw, gz, zst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default="fdl-test/debian:bookworm")
    parser.add_argument("--layers", help="also compare gzip and zstd layer bytes of this image")
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
    if args.layers:
        count, raw, gz, zst = layer_bytes(args.layers)
        print(f"\n{args.layers}: {count} layers")
        print_table(
            ("compression", "bytes", "vs raw", "vs gzip"),
            [
                ("none", f"{raw:,}", "1.00", ""),
                ("gzip -6", f"{gz:,}", f"{gz / raw:.3f}", "1.00"),
                ("zstd -3", f"{zst:,}", f"{zst / raw:.3f}", f"{zst / gz:.3f}"),
            ],
        )


if __name__ == "__main__":
    main()
