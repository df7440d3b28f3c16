"""A project's identity and its images (issue 34, points 6 and 7): the name `fdl init`
recorded rules over the directory a clone lives in, and `fdl image run` never runs an
image that another manifest or overlay built. In process, on the FakeEngine; ~3 s."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.engine import RunResult, set_default_engine
from tests.support.fakes import FakeEngine
from tests.support.images import make_project, make_variant

CPP = ["--template", "cpp", "--mode", "native", "--torch", "2.13.0", "--yes"]
MANIFEST = """\
name: my-model
images:
  train:
    args: [--steps, "200"]
"""
PROD = """\
images:
  train:
    args: !replace [--steps, "500"]
"""


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    from fdl import engine as module

    saved = list(module._DEFAULT)
    fake = FakeEngine()
    fake.add_image("debian:bookworm-slim", size=100)
    set_default_engine(fake)
    yield fake
    module._DEFAULT[:] = saved


def test_a_clone_under_another_name_keeps_the_recorded_name(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "my-model", *CPP], cwd=tmp_path).exit_code == 0
    clone = tmp_path / "p3"
    shutil.copytree(tmp_path / "my-model", clone)
    check = run_fdl(["ci", "check"], cwd=clone)
    assert check.exit_code == 0, check.output
    assert "the 5 generated files match fdl.yml" in check.stderr
    shown = run_fdl(["config", "explain", "name"], cwd=clone)
    assert "name = my-model" in shown.stdout and "fdl.yml:" in shown.stdout
    make_variant(clone)
    rendered = run_fdl(["image", "render", "train"], cwd=clone)
    assert rendered.exit_code == 0, rendered.output
    assert 'org.opencontainers.image.title="my-model-train"' in rendered.stdout
    assert "p3" not in rendered.stdout


def test_without_a_recorded_name_the_directory_names_the_images(tmp_path: Path, run_fdl) -> None:
    project = make_project(tmp_path, "images:\n  train: {}\n", name="Other Dir")
    make_variant(project)
    rendered = run_fdl(["image", "render", "train"], cwd=project)
    assert 'org.opencontainers.image.title="other-dir-train"' in rendered.stdout


def test_an_overlay_builds_and_runs_its_own_image(
    tmp_path: Path, run_fdl, engine: FakeEngine
) -> None:
    project = make_project(tmp_path, MANIFEST, name="p3")
    (project / "fdl.prod.yml").write_text(PROD, encoding="utf-8")
    make_variant(project)
    engine.run_result = lambda spec: RunResult(0, "trained\n")
    assert run_fdl(["image", "build", "train"], cwd=project).exit_code == 0
    assert "my-model-train:latest" in engine.images

    # The base's image is not the prod overlay's: prod has none yet.
    refused = run_fdl(["@prod", "image", "run", "train"], cwd=project)
    assert refused.exit_code == 2, refused.output
    assert "image my-model-train:prod is not built" in refused.stderr
    assert "fdl --env prod image build train" in refused.stderr

    built = run_fdl(["@prod", "image", "build", "train"], cwd=project)
    assert built.exit_code == 0, built.output
    ran = run_fdl(["@prod", "image", "run", "train"], cwd=project)
    assert ran.exit_code == 0, ran.output
    assert engine.runs[-1].image == "my-model-train:prod"
    labels = engine.inspect_image("my-model-train:prod").labels
    assert (
        labels["dev.fdl.manifest-hash"]
        != (engine.inspect_image("my-model-train:latest").labels["dev.fdl.manifest-hash"])
    )


def test_run_refuses_an_image_built_from_another_manifest(
    tmp_path: Path, run_fdl, engine: FakeEngine
) -> None:
    project = make_project(tmp_path, MANIFEST, name="p3")
    make_variant(project)
    engine.run_result = lambda spec: RunResult(0, "trained\n")
    assert run_fdl(["image", "build", "train"], cwd=project).exit_code == 0
    (project / "fdl.yml").write_text(MANIFEST.replace('"200"', '"500"'), encoding="utf-8")
    refused = run_fdl(["image", "run", "train"], cwd=project)
    assert refused.exit_code == 2, refused.output
    assert "image my-model-train:latest was built from another manifest" in refused.stderr
    assert "fdl image build train" in refused.stderr
    assert engine.runs == []
    assert run_fdl(["image", "build", "train"], cwd=project).exit_code == 0
    assert run_fdl(["image", "run", "train"], cwd=project).exit_code == 0
    assert len(engine.runs) == 1
