"""A manifest's secret never reaches an image layer: the train image's build stage copies
the project with `COPY . .`, so the generated .dockerignore must keep the manifests (and
their overlays and answers) out of the build context. Built with the real engine and
searched in every layer `docker save` writes (what an exported cache would hold)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from fdl.images import plan_images
from fdl.images._context import ensure_dockerignore
from fdl.manifest import load_manifest
from tests.support.images import make_project, make_variant

pytestmark = pytest.mark.docker

SECRET = "s3cr3t-" + uuid.uuid4().hex


def test_manifest_secrets_stay_out_of_the_build_context(tmp_path: Path) -> None:
    project = make_project(tmp_path, f"description: !secret {SECRET}\nimages:\n  train: {{}}\n")
    make_variant(project)
    (project / "fdl.local.yml").write_text(f"description: !secret {SECRET}\n")
    (project / "nested").mkdir()
    (project / "nested" / "fdl.yml").write_text(f"description: !secret {SECRET}\n")
    ensure_dockerignore(project, plan_images(load_manifest(project)))
    dockerfile = tmp_path / "Dockerfile"  # outside the context, as fdl's are
    dockerfile.write_text("FROM scratch\nCOPY . /src/\n")
    tag = f"fdl-it-context-{uuid.uuid4().hex[:10]}:latest"
    try:
        subprocess.run(
            ["docker", "build", "-q", "-f", str(dockerfile), "-t", tag, str(project)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        saved = subprocess.run(
            ["docker", "save", tag], check=True, capture_output=True, timeout=300
        ).stdout
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)
    assert b"CMakeLists.txt" in saved  # the project itself was sent
    assert SECRET.encode() not in saved
