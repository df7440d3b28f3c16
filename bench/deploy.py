"""Seconds from `submit` (sbatch --test-only, then sbatch --parsable of fdl's script) to the
job running and to its tasks' first output, on the local one-node SLURM cluster
(scripts/setup-slurm.sh), with the tasks running the test base image through docker (2
tasks, as a DDP job would); and from `cancel` (scancel) of a running job to its containers
being gone (the job script stops them within KillWait, 5 s on that cluster).

With --push, the bytes the cpp example's train image occupies in a real registry (the local
one, scripts/setup-registry.sh) pushed with gzip (`docker push`, what `compression: gzip`
does) and with zstd (fdl's own push of `compression: zstd`: an OCI manifest with zstd level 3
layers, BuildKit's default level): the sum of the blob sizes in each pushed manifest, read
back from the registry, and the seconds each push took.

Run: python bench/deploy.py [--runs 5] [--image fdl-test/debian:bookworm]
                            [--push | --push-image IMAGE] [--registry 127.0.0.1:5000] [--no-slurm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import print_table
from fdl.deploy import (
    FINISHED,
    OCI_MANIFEST,
    ZSTD_LAYER,
    ZSTD_LEVEL,
    DeployTarget,
    ImageArchs,
    cancel_job,
    job_state,
    plan_deploy,
    push_by_digest,
    push_zstd,
    submit_sbatch,
)
from fdl.engine import DockerEngine
from fdl.net import RegistryClient
from fdl.runner import SubprocessRunner

ACCEPT = (OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json")


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


def _containers(job_id: str) -> list[str]:
    done = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"name=fdl-{job_id}-"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def cancel_run(image_id: str, state: Path) -> float:
    """Seconds from scancel of a job whose two containers run to both being gone."""
    runner = SubprocessRunner()
    plan = plan_deploy(
        DeployTarget("bench-cancel", "slurm", tasks_per_node=2),
        project="bench",
        local_image="bench:latest",
        archs=ImageArchs("precompiled/cpu", None, ()),
        entrypoint=[],
        args=["sh", "-c", "echo started; sleep 600"],
        digest=image_id,
    )
    record = submit_sbatch(plan, state, runner)
    deadline = time.monotonic() + 120
    while len(_containers(record.job_id)) < 2:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {record.job_id}: its containers did not start")
        time.sleep(0.05)
    start = time.perf_counter()
    cancel_job(record, runner)
    while _containers(record.job_id):
        if time.perf_counter() - start > 120:
            raise SystemExit(f"job {record.job_id}: containers still running after cancel")
        time.sleep(0.05)
    return time.perf_counter() - start


def build_train_image(base: str, cache: Path, work: Path) -> str:
    """The cpp example's train image (CPU libtorch from the local wheel), as the deploy
    test builds it; its tag."""
    from fdl.images import build_images, plan_images
    from fdl.manifest import load_manifest
    from tests.support.images import cpu_variant_from_wheel, link_variant, make_project

    tag = f"fdl-bench-{uuid.uuid4().hex[:8]}-train:latest"
    project = make_project(work, f"images:\n  train:\n    base: {base}\n    tag: {tag}\n")
    link_variant(cpu_variant_from_wheel(cache / "variants"), project)
    specs = plan_images(load_manifest(project), ["train"])
    build_images(specs, project, engine=DockerEngine(SubprocessRunner()))
    return tag


def served_bytes(registry: str, repository: str, tag: str) -> tuple[str, int, int, set[str]]:
    """(manifest type, layer count, config + layer bytes, layer media types) of what the
    registry serves for ``repository:tag``: the bytes a pull of it transfers."""
    import json

    client = RegistryClient(registry, repository)
    served = client.manifest(tag, ACCEPT)
    body = json.loads(served.body)
    layers = body["layers"]
    total = body["config"]["size"] + sum(layer["size"] for layer in layers)
    return served.media_type, len(layers), total, {layer["mediaType"] for layer in layers}


def _manifest_name(media_type: str) -> str:
    return "OCI manifest" if media_type == OCI_MANIFEST else "docker v2 manifest"


def push_sizes(image: str, registry: str) -> None:
    """Push ``image`` with docker (gzip) and with fdl's zstd push; print what each put in
    the registry (sum of the blob sizes in the pushed manifests) and how long it took."""
    engine = DockerEngine(SubprocessRunner())
    tag = uuid.uuid4().hex[:10]
    rows = []
    gzip_remote = f"{registry}/fdl-bench/train-gzip:{tag}"
    start = time.perf_counter()
    push_by_digest(engine, image, gzip_remote)
    gzip_seconds = time.perf_counter() - start
    engine.remove_image(gzip_remote, force=True)
    kind, count, gz, _ = served_bytes(registry, "fdl-bench/train-gzip", tag)
    start = time.perf_counter()
    result = push_zstd(engine, image, f"{registry}/fdl-bench/train-zstd:{tag}")
    zstd_seconds = time.perf_counter() - start
    zkind, zcount, zst, ztypes = served_bytes(registry, "fdl-bench/train-zstd", tag)
    assert ztypes == {ZSTD_LAYER}, ztypes
    raw = result.tar_bytes
    rows.append(("none (layer tars)", count, f"{raw:,}", "1.000", "", ""))
    rows.append(
        ("gzip (docker push)", count, f"{gz:,}", f"{gz / raw:.3f}", "1.000", f"{gzip_seconds:.1f}")
    )
    rows.append(
        (f"zstd -{ZSTD_LEVEL} (fdl)", zcount, f"{zst:,}", f"{zst / raw:.3f}", f"{zst / gz:.3f}",
         f"{zstd_seconds:.1f}")
    )  # fmt: skip
    print(
        f"\n{image} pushed to {registry} (gzip: {_manifest_name(kind)}, "
        f"zstd: {_manifest_name(zkind)}; bytes: config + layers)"
    )
    print_table(("layers", "count", "bytes in registry", "vs tars", "vs gzip", "push s"), rows)


def layers(args: argparse.Namespace) -> None:
    if args.push_image:
        push_sizes(args.push_image, args.registry)
        return
    with tempfile.TemporaryDirectory(prefix="fdl-bench-") as work:
        image = build_train_image(args.image, args.cache, Path(work))
        try:
            push_sizes(image, args.registry)
        finally:
            DockerEngine(SubprocessRunner()).remove_image(image, force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default="fdl-test/debian:bookworm")
    parser.add_argument("--no-slurm", action="store_true", help="skip the submit timings")
    parser.add_argument(
        "--push", action="store_true",
        help="also push the cpp example's train image with gzip and with zstd to --registry",
    )  # fmt: skip
    parser.add_argument("--push-image", help="push this image instead of building the train image")
    parser.add_argument("--registry", default=os.environ.get("FDL_TEST_REGISTRY", "127.0.0.1:5000"))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "fdl-bench")
    args = parser.parse_args()
    if args.push or args.push_image:
        layers(args)
    if args.no_slurm:
        return
    image_id = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", args.image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as state:
        results = [one_run(image_id, Path(state)) for _ in range(args.runs)]
        cancels = [cancel_run(image_id, Path(state)) for _ in range(args.runs)]
    for label, values in (
        ("submit: sbatch returned", [r[0] for r in results]),
        ("submit: job RUNNING", [r[1] for r in results]),
        ("submit: first task output", [r[2] for r in results]),
        ("cancel: containers gone", cancels),
    ):
        rows.append(
            (label, f"{statistics.median(values):.2f}", f"{min(values):.2f}", f"{max(values):.2f}")
        )
    print(f"local SLURM, {args.runs} runs, 2 tasks via docker ({args.image})")
    print_table(("from ... to", "median s", "min s", "max s"), rows)


if __name__ == "__main__":
    main()
