"""`fdl version` (floDl's CLI has it), and the hints of the first hour (issue 29 item 5,
issue 25's `FDL_COMPOSE`): global options typed after a command, a `run:` script that
reads "$@" itself, an `FDL_COMPOSE` that is not a command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl import __version__


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text(
        "commands:\n"
        "  train: {run: echo train}\n"
        '  each: {run: \'printf "arg=%s\\\\n" "$@"\', append: fixed}\n'
        "  dev: {run: echo hi, docker: dev}\n"
    )
    (tmp_path / "fdl.ci.yml").write_text("commands:\n  train: {run: echo ci-train}\n")
    (tmp_path / "docker-compose.yml").write_text("services:\n  dev: {image: alpine}\n")
    return tmp_path


def test_fdl_version(run_fdl, project) -> None:
    result = run_fdl(["version"], cwd=project)
    assert result.exit_code == 0 and result.stdout == f"fdl {__version__}\n"
    as_json = run_fdl(["version", "--json"], cwd=project)
    assert json.loads(as_json.stdout) == {"version": __version__}
    assert run_fdl(["version", "extra"], cwd=project).exit_code == 2
    listed = run_fdl(["--help"], cwd=project)
    assert "  version " in listed.stdout


def test_global_options_after_the_command_get_the_form_that_applies_them(run_fdl, project):
    """`fdl train -e ci` suggested `fdl train -- -e ci`, which hands `-e ci` to the program."""
    result = run_fdl(["train", "-e", "ci"], cwd=project)
    assert result.exit_code == 2
    fix = result.stderr.splitlines()[1]
    assert "`fdl -e ci train` (or `fdl @ci train`)" in fix
    assert fix.index("fdl -e ci train") < fix.index("fdl train -- -e ci")  # first the likely one
    mixed = run_fdl(["train", "@ci", "--fast", "--", "x"], cwd=project)
    assert "`fdl @ci train -- --fast -- x`" in mixed.stderr
    plain = run_fdl(["train", "--fast"], cwd=project)  # nothing of fdl's: as before
    assert plain.exit_code == 2 and "fix: fdl train -- --fast" in plain.stderr


def test_a_run_script_that_reads_its_arguments_gets_them_once(fdl_process, project) -> None:
    result = fdl_process(["each", "--", "a b", "c"], cwd=project)
    assert result.exit_code == 0, result.stderr
    # each argument once, with the manifest's `append:` text after the script as before
    assert result.stdout.splitlines() == ["arg=a b", "arg=c", "arg=fixed"]
    dry = fdl_process(["each", "--dry-run", "--", "a b", "c"], cwd=project)
    assert "\"$@\" fixed' sh 'a b' c" in dry.stdout, dry.stdout
    assert "reads its arguments itself" in dry.stdout


def test_an_fdl_compose_that_is_not_a_command_line_fails_a_dry_run(run_fdl, project) -> None:
    env = {"FDL_IN_CONTAINER": "0", "FDL_COMPOSE": "docker 'compose"}
    result = run_fdl(["dev", "--dry-run"], cwd=project, env=env)
    assert result.exit_code == 4, result.output
    assert "FDL_COMPOSE" in result.stderr and "fix:" in result.stderr
    assert run_fdl(["dev", "--help"], cwd=project, env=env).exit_code == 0  # help still answers
