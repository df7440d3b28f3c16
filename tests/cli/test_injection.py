"""Values written into Dockerfiles, scripts and workflows: a control character (a newline
would start a new instruction) or, in a workflow, `${{` (GitHub evaluates it before the
shell) is refused at its file:line:col, and nothing is rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ci import MATRIX, ci_project
from tests.support.images import make_project, make_variant


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, "images:\n  train: {}\n")
    make_variant(project)
    return project


def test_a_newline_from_set_never_reaches_the_dockerfile(run_fdl, project: Path) -> None:  # type: ignore[no-untyped-def]
    hostile = 'images.train.program="build/train\\nRUN touch /PWN"'
    result = run_fdl(["--set", hostile, "image", "render"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "RUN touch /PWN" not in result.output
    assert "images.train.program" in result.output and "U+000A" in result.output
    # A multi-line setup script is still fdl's to join (one RUN, lines chained with &&).
    (project / "fdl.yml").write_text(
        "images:\n  train:\n    setup:\n      - |\n        a\n        b\n"
    )
    result = run_fdl(["image", "render"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "RUN a \\\n    && b" in result.stdout


@pytest.mark.parametrize(
    ("manifest", "where", "key"),
    [
        ('images:\n  train:\n    program: "build/train\\nRUN touch /PWN"\n', ":3:14", "program"),
        ('images:\n  train:\n    labels: {a: "x\\ry"}\n', ":3:17", "labels.a"),
        ('images:\n  train:\n    args: ["\\e[31m"]\n', ":3:12", "args.0"),
        ('images:\n  train:\n    labels: {"a\\nRUN x": y}\n', ":3:14", "labels.a"),
    ],
)
def test_control_characters_are_refused_at_their_place(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, manifest: str, where: str, key: str
) -> None:
    (project / "fdl.yml").write_text(manifest)
    result = run_fdl(["image", "render", "-o", "docker"], cwd=project)
    assert result.exit_code == 3, result.output
    assert f"fdl.yml{where}" in result.output and f"images.train.{key}" in result.output
    assert "fix:" in result.output
    assert not (project / "docker").exists()


def test_a_deploy_value_with_a_newline_is_refused(run_fdl, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "fdl.yml").write_text(
        "deploy:\n  lab:\n    kind: slurm\n    registry: r.example/x\n"
        '    env: {A: "1\\nrm -rf ~"}\n'
    )
    result = run_fdl(["deploy", "render", "lab"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "fdl.yml:5:" in result.output and "deploy.lab.env.A" in result.output
    assert "rm -rf" not in result.output


def test_a_github_expression_never_lands_in_the_workflow(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hostile = MATRIX + '    unit: ["${{ github.event.head_commit.message }}"]\n'
    project = ci_project(tmp_path, hostile)
    result = run_fdl(["ci", "generate"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "ci.tests.unit.0" in result.output and "${{" in result.output
    assert "fdl.yml:" in result.output
    assert not (project / ".github").exists()
