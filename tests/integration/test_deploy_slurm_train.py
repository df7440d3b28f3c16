"""`fdl deploy submit` on the local one-node SLURM cluster trains the C++ example in its
train image (built here FROM the local base image, CPU libtorch from the local wheel);
the program's output file appears in the mounted directory and `logs -f` follows the job
to completion. Slow: it builds the image (BuildKit caches make a second run quicker)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.engine import DockerEngine
from fdl.images import build_images, plan_images
from fdl.manifest import load_manifest
from fdl.runner import SubprocessRunner
from tests.integration.test_deploy_slurm import _slurm_problem
from tests.support.images import cpu_variant_from_wheel, link_variant, make_project

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RUN_ID = uuid.uuid4().hex[:10]
BASE_IMAGE = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    problem = _slurm_problem()
    if problem is not None:
        pytest.skip(problem)
    root = tmp_path_factory.mktemp("deploy")
    runs = root / "runs"
    runs.mkdir()
    runs.chmod(0o777)  # the image runs as its non-root user
    manifest = f"""\
images:
  train:
    base: {BASE_IMAGE}
    tag: fdl-it-{RUN_ID}-train:latest
deploy:
  local:
    kind: slurm
    runtime: docker
    tasks-per-node: 1
    mounts: ["{runs}:/workspace/runs"]
    args: [--steps, "4", --out, /workspace/runs]
"""
    project = make_project(root, manifest)
    link_variant(cpu_variant_from_wheel(tmp_path_factory.mktemp("variants")), project)
    engine = DockerEngine(SubprocessRunner())
    specs = plan_images(load_manifest(project), ["train"])
    made: list[str] = []
    try:
        results = build_images(specs, project, engine=engine)
        made.append(specs[0].tag)
        if results[-1].libtorch_image:
            made.append(results[-1].libtorch_image)
        yield project
    finally:
        for name in made:
            engine.remove_image(name, force=True)


def test_submit_trains_in_the_image_and_the_output_appears(project: Path, fdl_process) -> None:  # type: ignore[no-untyped-def]
    submitted = fdl_process(["deploy", "submit", "--json"], cwd=project, timeout=120)
    assert submitted.exit_code == 0, submitted.output
    data = json.loads(submitted.stdout)
    assert data["image"].startswith("sha256:")  # no registry: the local image by its ID
    logs = fdl_process(["deploy", "logs", "-f"], cwd=project, timeout=300)
    assert logs.exit_code == 0, logs.output
    assert "step 3 loss" in logs.stdout, logs.stdout
    status = fdl_process(["deploy", "status", "--json"], cwd=project, timeout=60)
    assert json.loads(status.stdout)["state"] == "COMPLETED", status.output
    losses = (project.parent / "runs" / "loss.txt").read_text().split()
    assert len(losses) == 4


def test_submit_wait_and_a_bench_side_on_the_cluster(project: Path, fdl_process) -> None:  # type: ignore[no-untyped-def]
    """`submit --wait` prints the job's output and its exit status is the job's; a bench
    side of kind `deploy:` runs one job per round and reads the program's figures."""
    waited = fdl_process(["deploy", "submit", "--wait"], cwd=project, timeout=300)
    assert waited.exit_code == 0, waited.output
    assert "step 3 loss" in waited.stdout
    manifest = project / "fdl.yml"
    manifest.write_text(
        manifest.read_text()
        + "bench:\n  train:\n    compare: {cluster: {deploy: local}}\n    rounds: 2\n"
        "    warmup: 0\n    figures: {loss: 'loss ([0-9.eE+-]+)'}\n"
    )
    ran = fdl_process(["bench", "run", "-o", "bench.jsonl"], cwd=project, timeout=600)
    assert ran.exit_code == 0, ran.output
    rounds = [
        json.loads(line)
        for line in (project / "bench.jsonl").read_text().splitlines()
        if '"type": "round"' in line
    ]
    assert [r["side"] for r in rounds] == ["cluster", "cluster"]
    assert all(r["figures"]["loss"] > 0 for r in rounds)
