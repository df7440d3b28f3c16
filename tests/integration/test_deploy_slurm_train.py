"""`fdl deploy submit` on the local one-node SLURM cluster trains the C++ example in its
train image (built here FROM the local base image, CPU libtorch from the local wheel);
the program's output file appears in the project's runs/ (the image profile's mount,
carried into the job), `logs -f` follows the job to completion, a source edit is in the
image the job runs, and Ctrl-C on `submit --wait` leaves no job and no container. Slow: it
builds the image (BuildKit caches make a second run quicker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
    # runs/ does not exist: submit makes it, owned by the image's non-root user.
    manifest = f"""\
images:
  train:
    base: {BASE_IMAGE}
    tag: fdl-it-{RUN_ID}-train:latest
    mounts: ["./runs:/workspace/runs"]
deploy:
  local:
    kind: slurm
    runtime: docker
    tasks-per-node: 1
    args: [--steps, "4", --out, /workspace/runs]
  long:
    kind: slurm
    runtime: docker
    args: [--steps, "100000000", --out, /workspace/runs]
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
    submitted = fdl_process(["deploy", "submit", "local", "--json"], cwd=project, timeout=300)
    assert submitted.exit_code == 0, submitted.output
    data = json.loads(submitted.stdout)
    assert data["image"].startswith("sha256:")  # no registry: the local image by its ID
    logs = fdl_process(["deploy", "logs", "local", "-f"], cwd=project, timeout=300)
    assert logs.exit_code == 0, logs.output
    assert "step 3 loss" in logs.stdout, logs.stdout
    status = fdl_process(["deploy", "status", "local", "--json"], cwd=project, timeout=60)
    assert json.loads(status.stdout)["state"] == "COMPLETED", status.output
    losses = (project / "runs" / "loss.txt").read_text().split()  # the profile's mount
    assert len(losses) == 4


def test_submit_wait_and_a_bench_side_on_the_cluster(project: Path, fdl_process) -> None:  # type: ignore[no-untyped-def]
    """`submit --wait` prints the job's output and its exit status is the job's; a bench
    side of kind `deploy:` runs one job per round and reads the program's figures."""
    waited = fdl_process(["deploy", "submit", "local", "--wait"], cwd=project, timeout=300)
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


def test_a_source_edit_is_in_the_image_the_job_runs(project: Path, fdl_process) -> None:  # type: ignore[no-untyped-def]
    source = project / "src" / "main.cpp"
    marker = f"edited {uuid.uuid4().hex[:8]}"
    original = source.read_text()
    source.write_text(
        original.replace(
            "int main(int argc, char** argv) {",
            f'int main(int argc, char** argv) {{\n  std::cout << "{marker}" << std::endl;',
        )
    )
    try:
        waited = fdl_process(["deploy", "submit", "local", "--wait"], cwd=project, timeout=600)
    finally:
        source.write_text(original)
    assert waited.exit_code == 0, waited.output
    assert marker in waited.stdout, waited.output


def _containers_of(job_id: str) -> list[str]:
    done = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"name=fdl-{job_id}-"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def test_ctrl_c_on_submit_wait_leaves_no_job_and_no_container(project: Path) -> None:
    environ = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "deploy", "submit", "long", "--wait"],
        cwd=project,
        env={**environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the job's output: the container is training
            if line.startswith("step "):
                break
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    record = json.loads((project / ".fdl" / "deploy" / "long.json").read_text())
    assert f"cancelled slurm job {record['job_id']} of long" in stderr
    deadline = time.monotonic() + 60  # an upper bound, not a timing check
    while _containers_of(record["job_id"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _containers_of(record["job_id"]) == []
