"""How the generated workflows install fdl (issue 34, point 10): the fdl the user has
(``ci.fdl``, else as this fdl was installed), never ``fdl==V`` from an index someone else
could take; and a source build longer than a hosted runner's job limit is said at
generate time with the ways out. In process, a few seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.ci import INSTALLED, MATRIX, ci_project

WORKFLOW = ".github/workflows/fdl-images.yml"


def _installed(monkeypatch: pytest.MonkeyPatch, recorded: dict[str, Any] | None) -> None:
    monkeypatch.setattr("fdl.ci._fdl.installed_from", lambda: recorded)


def _install_steps(project: Path) -> list[str]:
    workflow = yaml.safe_load((project / WORKFLOW).read_text())
    return [
        step["run"]
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if step["name"] == "Install fdl"
    ]


def _generate(run_fdl, project: Path) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    result = run_fdl(["ci", "generate"], cwd=project)
    return result.exit_code, result.output


def test_a_git_install_is_installed_at_its_commit(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(monkeypatch, INSTALLED)
    project = ci_project(tmp_path)
    code, output = _generate(run_fdl, project)
    assert code == 0, output
    wanted = f"python -m pip install git+{INSTALLED['url']}@{INSTALLED['vcs_info']['commit_id']}"
    steps = _install_steps(project)
    assert steps and set(steps) == {wanted}
    assert "installs fdl with: pip install git+https://git.example.com/acme/fdl@" in output
    assert "set ci.fdl: git+" in output  # how to keep it for whoever generates next


def test_a_wheel_in_the_repository_is_installed_by_its_path(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = ci_project(tmp_path)
    wheel = project / "vendor" / "fdl-0.1.0-py3-none-any.whl"
    _installed(monkeypatch, {"url": wheel.as_uri(), "archive_info": {}})
    code, output = _generate(run_fdl, project)
    assert code == 0, output
    assert set(_install_steps(project)) == {
        "python -m pip install ./vendor/fdl-0.1.0-py3-none-any.whl"
    }


@pytest.mark.parametrize(
    ("recorded", "words"),
    [
        (None, "from a package index"),
        ({"url": "file:///opt/src/fdl", "dir_info": {"editable": True}}, "outside the repository"),
    ],
    ids=["index", "checkout-elsewhere"],
)
def test_an_fdl_a_runner_cannot_install_fails_its_step_with_the_fix(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: Any, words: str
) -> None:
    _installed(monkeypatch, recorded)
    project = ci_project(tmp_path)
    code, output = _generate(run_fdl, project)
    assert code == 0, output
    assert "warning: the workflow cannot install fdl" in output and words in output
    text = (project / WORKFLOW).read_text()
    assert "pip install fdl==" not in text and "/opt/src" not in text  # no index name, no host path
    for step in _install_steps(project):
        assert step.rstrip().endswith("exit 1") and "set ci.fdl" in step


@pytest.mark.parametrize(
    "value",
    ["fdl==0.1.0", "fdl", "--extra-index-url https://pypi.example.com/simple fdl==0.1.0"],
)
def test_ci_fdl_by_name_only_is_refused_at_its_line(run_fdl, tmp_path: Path, value: str) -> None:
    project = ci_project(tmp_path, MATRIX + f"  fdl: {value}\n")
    result = run_fdl(["ci", "generate"], cwd=project)
    assert result.exit_code == 3, result.output  # a manifest error
    assert "fdl.yml:13:8: ci.fdl" in result.output and "anyone could publish" in result.output
    assert "git+https://" in result.output  # the fix names a requirement one controls
    assert not (project / WORKFLOW).exists()


def test_ci_fdl_with_the_users_index_is_taken_as_pip_arguments(run_fdl, tmp_path: Path) -> None:
    value = "--index-url https://pypi.example.com/simple fdl==0.1.0"
    project = ci_project(tmp_path, MATRIX + f"  fdl: {value}\n")
    code, output = _generate(run_fdl, project)
    assert code == 0, output
    assert set(_install_steps(project)) == {f"python -m pip install {value}"}
    assert "(ci.fdl (fdl.yml:13" in output


def test_a_source_build_longer_than_a_hosted_job_is_said_with_the_ways_out(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(monkeypatch, INSTALLED)
    project = ci_project(tmp_path)
    code, output = _generate(run_fdl, project)
    assert code == 0, output
    assert "libtorch-pascal-blackwell: fdl estimates this source build at ~" in output
    assert "after 360 minutes" in output
    for way in ("ci.build-runner", "--on TARGET", "fdl ci pushed"):
        assert way in output
    jobs = yaml.safe_load((project / WORKFLOW).read_text())["jobs"]
    assert jobs["libtorch-pascal-blackwell"]["timeout-minutes"] == 360


def test_a_source_build_on_a_runner_of_yours_gets_more_time_and_no_warning(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(monkeypatch, INSTALLED)
    manifest = MATRIX + "  build-runner: [self-hosted, linux, x64]\n"
    project = ci_project(tmp_path, manifest)
    code, output = _generate(run_fdl, project)
    assert code == 0, output
    assert "fdl estimates" not in output
    jobs = yaml.safe_load((project / WORKFLOW).read_text())["jobs"]
    assert jobs["libtorch-pascal-blackwell"]["timeout-minutes"] == 2880


def test_init_says_when_its_workflows_cannot_install_this_fdl(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(monkeypatch, {"url": "file:///opt/src/fdl", "dir_info": {"editable": True}})
    result = run_fdl(["init", "my-model", "--template", "cpp", "-m", "native"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "the workflows cannot install fdl" in result.output and "set ci.fdl" in result.output
    ci = (tmp_path / "my-model" / ".github" / "workflows" / "ci.yml").read_text()
    assert 'pip install "fdl==' not in ci and "exit 1" in ci
    # Installed from git: the workflow installs that commit, and init says nothing.
    _installed(monkeypatch, INSTALLED)
    other = run_fdl(["init", "other", "--template", "cpp", "-m", "native"], cwd=tmp_path)
    assert "cannot install fdl" not in other.output
    assert (
        INSTALLED["vcs_info"]["commit_id"]
        in (tmp_path / "other" / ".github" / "workflows" / "ci.yml").read_text()
    )
