"""Every error in one form (what, where, fix) with the README's exit codes, also the ones
click and typer would word themselves, and a refused `--json` command answers in JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text("commands:\n  hi:\n    run: echo hi\n")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message", "fix"),
    [
        (["config", "shw"], "fdl config: no such command 'shw'", "`fdl config show`"),
        (["config", "show", "--bogus"], "fdl config show: no such option: --bogus", "--help"),
        (["libtorch", "download", "--cda", "12.6"], "no such option: --cda", "--cuda?"),
        (["config", "explain", "a", "b"], "got unexpected extra argument", "--help"),
    ],
)
def test_click_usage_errors_come_out_in_fdls_form(run_fdl, project, args, message, fix) -> None:
    result = run_fdl(args, cwd=project)
    assert result.exit_code == 2, result.output
    first, second = result.stderr.splitlines()[:2]
    assert first.startswith("error: ") and message in first
    assert second.strip().startswith("fix: ") and fix in second
    assert "Usage:" not in result.stderr


def test_an_unknown_environment_is_an_error_for_every_command(run_fdl, project, tmp_path) -> None:
    env = {"FDL_HOME": str(tmp_path / "home")}
    for args in (["libtorch", "list"], ["diagnose", "--no-docker"], ["config", "show"], ["hi"]):
        result = run_fdl(["--env", "nope", *args], cwd=project, env=env)
        assert result.exit_code == 3, (args, result.output)
        assert "environment 'nope' not found" in result.stderr


def test_a_refused_json_command_prints_a_json_error(run_fdl, tmp_path) -> None:
    result = run_fdl(
        ["libtorch", "build", "--archs", "3.5;12.0", "--native", "--dry-run", "--json"],
        cwd=tmp_path,
        env={"FDL_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["exit_code"] == 2 and error["kind"] == "UsageError"
    assert "sm_35 + sm_120" in error["message"] and error["hint"]
    assert "error:" in result.stderr  # people still read stderr


def test_a_json_manifest_error_has_its_location(run_fdl, tmp_path) -> None:
    (tmp_path / "fdl.yml").write_text("libtorch:\n  build:\n    jobs: many\n")
    result = run_fdl(["libtorch", "build", "--dry-run", "--json"], cwd=tmp_path)
    assert result.exit_code == 3
    error = json.loads(result.stdout)["error"]
    assert error["location"] == {"file": "fdl.yml", "line": 3, "column": 11}
