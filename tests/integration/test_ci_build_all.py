"""``fdl image build --all`` against the real docker engine: a two-cell matrix (the dev
and train images of the C++ training program, CPU variant) built FROM the local base
image, which an overlay puts into the manifest. The CPU variant is installed with
``fdl libtorch install --from-wheel`` from the local torch wheel.

The libtorch image must be made before the cells, both images must exist, and the
train image must train. Images are named per run and removed afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdl.engine import DockerEngine, RunSpec
from fdl.runner import SubprocessRunner
from tests.support.ci import ci_project
from tests.support.cpu_view import install_cpu_view

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parent.parent.parent
RUN_ID = uuid.uuid4().hex[:10]
BASE_IMAGE = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")
MANIFEST = f"""\
description: fdl ci integration test
libtorch:
  torch: "2.13"
images:
  dev: {{}}
  train:
    args: [--steps, "4"]
ci:
  project: fdl-it-{RUN_ID}
  variants: [cpu]
"""
# The local base image comes in through an overlay, as a team would pin a mirror.
OVERLAY = f"""\
images:
  dev:
    base: {BASE_IMAGE}
  train:
    base: {BASE_IMAGE}
"""


def _fdl(args: list[str], cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FDL__")}
    environ.pop("FDL_ENV", None)
    environ["PYTHONPATH"] = str(REPO) + os.pathsep + environ.get("PYTHONPATH", "")
    environ["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "fdl", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project with the CPU variant installed from PyPI's wheel (its CPU view), as CI
    would."""
    project = ci_project(tmp_path_factory.mktemp("ci-build-all"), MANIFEST)
    (project / "fdl.local.yml").write_text(OVERLAY, encoding="utf-8")
    installed = install_cpu_view(project)
    assert installed == project / "libtorch" / "precompiled" / "cpu"
    return project


@dataclass
class Built:
    engine: DockerEngine
    report: dict[str, object]
    tags: dict[str, str]


@pytest.fixture(scope="module")
def built(project: Path) -> Iterator[Built]:
    engine = DockerEngine(SubprocessRunner())
    matrix = _fdl(["-e", "local", "ci", "matrix", "--json"], project)
    assert matrix.returncode == 0, matrix.stderr
    tags = {cell["id"]: cell["tag"] for cell in json.loads(matrix.stdout)["cells"]}
    made = list(tags.values())
    # the stable name fdl points at the variant image is the matrix project's own
    stable = {cell["args"].get("LIBTORCH_IMAGE") for cell in json.loads(matrix.stdout)["cells"]}
    made.extend(sorted(name for name in stable if name))
    ours: list[str] = []
    try:
        done = _fdl(["-e", "local", "image", "build", "--all", "--json"], project)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        report = json.loads(done.stdout)
        for step in report["steps"]:
            if step["kind"] == "libtorch":
                made.append(step["image"])
                ours.append(engine.inspect_image(step["image"]).id)
        yield Built(engine, report, tags)
    finally:
        for name in made:
            engine.remove_image(name, force=True)
        for image_id in ours:
            if engine.image_exists(image_id):
                engine.remove_image(image_id, force=True)


def test_the_libtorch_image_is_made_before_the_cells(built: Built) -> None:
    steps = built.report["steps"]
    assert isinstance(steps, list)
    assert built.report["method"] == "engine"  # no buildx plugin here
    assert [(step["kind"], step["name"]) for step in steps] == [
        ("libtorch", "precompiled/cpu"),
        ("cell", "dev-cpu"),
        ("cell", "train-cpu"),
    ]
    assert steps[0]["image"].startswith("fdl-libtorch:precompiled-cpu-")
    libtorch = built.engine.inspect_image(steps[0]["image"])
    assert libtorch.labels["dev.fdl.kind"] == "libtorch"


def test_both_cells_exist_with_the_matrix_tags(built: Built) -> None:
    assert built.tags == {
        "dev-cpu": f"fdl-it-{RUN_ID}-dev:cpu-latest",
        "train-cpu": f"fdl-it-{RUN_ID}-train:cpu-latest",
    }
    for tag in built.tags.values():
        info = built.engine.inspect_image(tag)
        assert info.labels["dev.fdl.variant"] == "precompiled/cpu"
        assert info.labels["org.opencontainers.image.base.name"] == BASE_IMAGE


def test_the_cells_run_as_ci_tests_them(built: Built) -> None:
    train = built.engine.run(RunSpec(built.tags["train-cpu"], ("--steps", "2")))
    assert train.ok, train.stderr
    assert train.stdout.count("loss") == 2
    dev = built.engine.run(RunSpec(built.tags["dev-cpu"], ("cmake", "--version")))
    assert dev.ok and "cmake version" in dev.stdout


def test_a_second_build_reuses_everything(built: Built, project: Path) -> None:
    again = _fdl(["-e", "local", "image", "build", "--all", "--json"], project)
    assert again.returncode == 0, again.stderr[-3000:]
    steps = json.loads(again.stdout)["steps"]
    for step in steps:
        if step["kind"] == "cell":
            assert step["cached_steps"] > 0
