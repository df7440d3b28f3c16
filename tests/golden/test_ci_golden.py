"""Exact text of the generated bake file and workflow for a matrix of two profiles and
three variants (CPU, official CUDA 13.0, the sm_61 + sm_120 source build), and checks
that the golden files are what the tools read: HCL, a valid GitHub workflow, Dockerfiles
hadolint accepts (rewrite with FDL_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.ci import generated_files
from tests.support.ci import INSTALLED, PUSHED_MATRIX, ci_project, plan
from tests.support.golden import GOLDEN_DIR, assert_golden

CI_GOLDEN = GOLDEN_DIR / "ci"


@pytest.fixture(autouse=True)
def _installed_from_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """This fdl as installed from git at a commit: the workflow installs it so (the tests'
    own fdl may be an editable checkout or a wheel)."""
    monkeypatch.setattr("fdl.ci._fdl.installed_from", lambda: dict(INSTALLED))


def test_bake_workflow_and_file_list(tmp_path: Path) -> None:
    files = {item.path: item.text for item in generated_files(plan(ci_project(tmp_path)))}
    assert_golden("ci/docker-bake.hcl", files["ci/docker-bake.hcl"])
    assert_golden("ci/workflow.yml", files[".github/workflows/fdl-images.yml"])
    assert_golden(
        "ci/train-pascal-blackwell.Dockerfile",
        files["ci/dockerfiles/train-pascal-blackwell.Dockerfile"],
    )
    assert_golden("ci/files.txt", "".join(f"{path}\n" for path in sorted(files)))


def test_a_pushed_variants_libtorch_dockerfile(tmp_path: Path) -> None:
    """A ci.pushed variant's image copies the pushed tree by digest (and hadolint takes it)."""
    planned = plan(ci_project(tmp_path, PUSHED_MATRIX))
    files = {item.path: item.text for item in generated_files(planned)}
    assert_golden(
        "ci/libtorch-pushed.Dockerfile",
        files["ci/dockerfiles/libtorch-pascal-blackwell.Dockerfile"],
    )
    done = subprocess.run(
        [_tool("hadolint"), "--no-color", "--failure-threshold", "style", "-"],
        input=(CI_GOLDEN / "libtorch-pushed.Dockerfile").read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_golden_bake_file_parses_as_hcl() -> None:
    import hcl2

    parsed = hcl2.loads((CI_GOLDEN / "docker-bake.hcl").read_text(encoding="utf-8"))
    names = [name for block in parsed["target"] for name in block]
    assert len(names) == 9  # three libtorch images and six cells


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (see pyproject.toml's dev extra)")
    return found


def test_the_golden_workflow_validates_against_githubs_schema() -> None:
    done = subprocess.run(
        [
            _tool("check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            str(CI_GOLDEN / "workflow.yml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_passes_the_golden_cell_dockerfile() -> None:
    done = subprocess.run(
        [
            _tool("hadolint"),
            "--no-color",
            "--failure-threshold",
            "style",
            str(CI_GOLDEN / "train-pascal-blackwell.Dockerfile"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
