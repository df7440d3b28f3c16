"""Projects with a ``ci:`` section for the CI tests: the C++ training program
(tests/fixtures/cpp-train) with a matrix of two profiles and three variants."""

from __future__ import annotations

from pathlib import Path

from fdl.ci import Matrix, plan_matrix
from fdl.manifest import load_manifest
from tests.support.images import make_project

VERSION = "0.0.0+golden"

# Two profiles x three variants: the CPU build, an official CUDA build, a source build.
MATRIX = """\
description: A tiny libtorch training program
libtorch:
  torch: "2.13"
images:
  dev: {}
  train:
    args: [--steps, "20"]
ci:
  registry: ghcr.io/acme
  variants: [cpu, cu130, build:pascal-blackwell]
  tests:
    train: [--steps, "2"]
"""


def ci_project(root: Path, manifest: str = MATRIX, *, name: str = "cpp-train") -> Path:
    """The training program under ``root/name`` with ``manifest`` as its fdl.yml."""
    return make_project(root, manifest, name=name)


def plan(project: Path, **kwargs: object) -> Matrix:
    """The project's matrix, planned with a fixed fdl version and the project as the
    repository root."""
    return plan_matrix(
        load_manifest(project),
        fdl_version=VERSION,
        repo_root=project,
        **kwargs,  # type: ignore[arg-type]
    )


# How "this fdl" was installed, for tests that fix it (a git URL at a commit).
INSTALLED = {
    "url": "https://git.example.com/acme/fdl",
    "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567"},
}

# The source-built variant taken from the team's registry (`fdl libtorch push` printed it).
PUSHED = "registry.example.com/team/libtorch:2.13.0-cu129-sm61-sm120@sha256:" + "ab" * 32
PUSHED_MATRIX = MATRIX + f"  pushed:\n    build:pascal-blackwell: {PUSHED}\n"
