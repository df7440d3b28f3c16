"""``images.<profile>.context``: a build context below the project (the program in a
subdirectory, as in fdl's own manifest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fdl.errors import ManifestError
from fdl.images import plan_images, render_compose
from fdl.images._build import build_images, build_spec
from fdl.manifest import load_manifest
from tests.support.fakes import FakeEngine
from tests.support.images import FIXTURE, make_variant

MANIFEST = """\
images:
  dev:
    context: services/train
  train:
    context: services/train/
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "services" / "train")
    (tmp_path / "fdl.yml").write_text(MANIFEST, encoding="utf-8")
    make_variant(tmp_path)
    return tmp_path


def test_the_program_is_found_in_the_context(project: Path) -> None:
    dev, train = plan_images(load_manifest(project))
    assert (dev.context, train.context) == ("services/train", "services/train")
    assert train.program == "build/train"  # from services/train/CMakeLists.txt


def test_builds_send_the_context_and_ignore_file_lands_there(project: Path) -> None:
    specs = plan_images(load_manifest(project))
    assert build_spec(specs[1], project).context == project / "services" / "train"
    engine = FakeEngine()
    build_images(specs, project, engine=engine)
    contexts = [spec.context for spec in engine.builds]
    # dev, then the train image's libtorch image (context: the variant), then train.
    assert contexts == [
        project / "services" / "train",
        project / "libtorch" / "precompiled" / "cpu",
        project / "services" / "train",
    ]
    assert (project / "services" / "train" / ".dockerignore").is_file()
    assert not (project / ".dockerignore").exists()


def test_compose_builds_from_the_context(project: Path) -> None:
    text = render_compose(plan_images(load_manifest(project)), dockerfile_dir="docker")
    assert 'context: "./services/train"' in text
    assert 'dockerfile: "../../docker/train.Dockerfile"' in text
    assert '"./services/train:/workspace"' in text  # the dev sources


@pytest.mark.parametrize("bad", ["/abs/path", "../outside", "a/../../b"])
def test_a_context_stays_inside_the_project(tmp_path: Path, bad: str) -> None:
    (tmp_path / "fdl.yml").write_text(f"images:\n  dev:\n    context: {bad}\n", encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert "images.dev.context" in str(caught.value)
