"""`fdl config ...` and the global options, through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "manifest-project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    shutil.copytree(FIXTURE, target)
    return target


def test_version(run_fdl) -> None:
    from fdl import __version__

    result = run_fdl(["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"fdl {__version__}\n"


def test_help_lists_builtins_commands_and_environments(run_fdl, project: Path) -> None:
    result = run_fdl(["--env", "ci", "--help"], cwd=project)
    assert result.exit_code == 0
    assert "config" in result.stdout
    assert "Project commands (fdl.yml: Demo training project)" in result.stdout
    assert "Environments: ci (active, also a command), gpu" in result.stdout


def test_help_outside_a_project(run_fdl, tmp_path: Path) -> None:
    result = run_fdl(["--help"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "Built-in commands:" in result.stdout and "  config " in result.stdout
    assert "Project commands" not in result.stdout


def test_env_selection_forms_agree(run_fdl, project: Path) -> None:
    outputs = {
        "flag": run_fdl(["--env", "ci", "config", "show", "--json"], cwd=project).stdout,
        "at": run_fdl(["@ci", "config", "show", "--json"], cwd=project).stdout,
        "variable": run_fdl(
            ["config", "show", "--json"], cwd=project, env={"FDL_ENV": "ci"}
        ).stdout,
        "local": run_fdl(["config", "show", "--json", "--env", "ci"], cwd=project).stdout,
    }
    assert len(set(outputs.values())) == 1
    assert "bench" not in json.loads(outputs["flag"])["commands"]


def test_conflicting_environments(run_fdl, project: Path) -> None:
    result = run_fdl(["--env", "ci", "@gpu", "config", "show"], cwd=project)
    assert result.exit_code == 2
    assert "two environments" in result.stderr


def test_missing_overlay_exit_code_and_listing(run_fdl, project: Path) -> None:
    result = run_fdl(["--env", "stage", "config", "show"], cwd=project)
    assert result.exit_code == 3
    assert "environment 'stage' not found" in result.stderr
    assert "ci, gpu" in result.stderr


def test_invalid_manifest_exit_code_and_location(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text("commands:\n  t:\n    run: x\n    dokcer: dev\n")
    result = run_fdl(["config", "show"], cwd=tmp_path)
    assert result.exit_code == 3
    assert "fdl.yml:4:5: commands.t.dokcer: unknown key 'dokcer'" in result.stderr
    assert "did you mean 'docker'?" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_manifest(run_fdl, tmp_path: Path) -> None:
    result = run_fdl(["config", "show"], cwd=tmp_path)
    assert result.exit_code == 3
    assert "no fdl.yml found" in result.stderr
    assert "fdl init" in result.stderr


def test_unknown_global_option(run_fdl, tmp_path: Path) -> None:
    result = run_fdl(["--evn", "ci"], cwd=tmp_path)
    assert result.exit_code == 2
    assert "did you mean --env?" in result.stderr


def test_unknown_config_subcommand_is_a_usage_error(run_fdl, project: Path) -> None:
    result = run_fdl(["config", "shwo"], cwd=project)
    assert result.exit_code == 2


def test_secrets_are_masked(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text(
        "commands:\n  push:\n    run: !secret echo s3cr3t\n    description: uses api_token\n"
    )
    shown = run_fdl(["config", "show"], cwd=tmp_path)
    assert shown.exit_code == 0, shown.stderr
    assert "s3cr3t" not in shown.stdout
    assert '"***"' in shown.stdout
    explained = run_fdl(["config", "explain", "--json"], cwd=tmp_path)
    assert "s3cr3t" not in explained.stdout
    revealed = run_fdl(["config", "show", "--show-secrets"], cwd=tmp_path)
    assert "s3cr3t" in revealed.stdout


def test_example_file_is_used_read_only_without_a_terminal(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.yml.example").write_text("description: from example\n")
    result = run_fdl(["config", "show"], cwd=tmp_path)
    assert result.exit_code == 0
    assert "from example" in result.stdout
    assert result.stderr.count("read-only") == 1
    assert not (tmp_path / "fdl.yml").exists()


def test_schema_command_outputs_json_schema(run_fdl, tmp_path: Path) -> None:
    result = run_fdl(["config", "schema"], cwd=tmp_path)
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "commands" in schema["properties"]
    out = tmp_path / "s.json"
    assert run_fdl(["config", "schema", "-o", str(out)], cwd=tmp_path).exit_code == 0
    assert json.loads(out.read_text()) == schema


def test_validate_all_envs(run_fdl, project: Path) -> None:
    result = run_fdl(["config", "validate", "--all-envs"], cwd=project)
    assert result.exit_code == 0, result.stderr
    assert "valid (base, ci, gpu)" in result.stderr
    (project / "fdl.ci.yml").write_text("commands:\n  test:\n    run: [broken]\n")
    broken = run_fdl(["config", "validate", "--all-envs"], cwd=project)
    assert broken.exit_code == 3
    assert "fdl.ci.yml:3:10" in broken.stderr


def test_directory_option(run_fdl, project: Path, tmp_path: Path) -> None:
    result = run_fdl(["-C", str(project), "config", "show", "--json"], cwd=tmp_path)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["description"] == "Demo training project"


def test_manifest_option(run_fdl, project: Path, tmp_path: Path) -> None:
    result = run_fdl(["-f", str(project / "fdl.gpu.yml"), "config", "show", "--json"], cwd=tmp_path)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["description"] == "Demo training project (GPU runner)"


def test_force_color(fdl_process, tmp_path: Path) -> None:
    result = fdl_process(["config", "show"], cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "\x1b[31" in result.stderr
    plain = fdl_process(
        ["--no-color", "config", "show"], cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": ""}
    )
    assert "\x1b[" not in plain.stderr


def test_explain_names_fdls_default_of_an_image_field_and_its_source(
    tmp_path: Path, run_fdl
) -> None:
    """`config explain images.train.base` said "no layer sets" (issue 34, point 14): the
    defaults are a layer too, named with the data they come from."""
    from tests.support.images import make_project, make_variant

    project = make_project(tmp_path, "images:\n  train: {}\n")
    cpu = run_fdl(["config", "explain", "images.train.base"], cwd=project)
    assert cpu.exit_code == 0, cpu.output
    assert "images.train.base = debian:bookworm-slim" in cpu.stdout
    assert "fdl's default" in cpu.stdout and "images.yml: bases.cpu.runtime" in cpu.stdout
    assert "no libtorch variant is active" in cpu.stdout
    make_variant(project, "precompiled/cu128", cuda="12.8", archs=("sm_120",))
    cuda = run_fdl(["config", "explain", "images.train.base", "--json"], cwd=project)
    (entry,) = json.loads(cuda.stdout)
    assert entry["layer"] == "default" and entry["value"].startswith("nvidia/cuda:12.8")
    assert "CUDA 12.8 (variant precompiled/cu128" in entry["source"]
    tag = run_fdl(["config", "explain", "images.train.tag"], cwd=project)
    assert "images.train.tag = cpp-train-train:latest" in tag.stdout
    # a key fdl does not default is still an error with its fix
    assert run_fdl(["config", "explain", "images.train.nope"], cwd=project).exit_code == 3
