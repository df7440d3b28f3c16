"""Running fdl inside a nested manifest's directory runs that manifest's commands (floDl's
playground README: `cd flodl-hf && fdl classify`), and the project's commands still run."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text(
        "commands:\n  hf:\n  test: {run: echo root-test}\n  build: {run: echo root-build}\n"
    )
    (tmp_path / "hf" / "parity").mkdir(parents=True)
    (tmp_path / "hf" / "fdl.yml").write_text(
        "commands:\n  parity: {path: ./parity/}\n  classify: {run: echo classify}\n"
    )
    (tmp_path / "hf" / "parity" / "fdl.yml").write_text(
        "commands:\n  bert: {run: echo bert}\n  test: {run: echo parity-test}\n"
    )
    return tmp_path


def test_a_command_of_the_directorys_manifest_runs_there(run_fdl, project) -> None:
    parity = project / "hf" / "parity"
    bert = run_fdl(["bert", "--dry-run"], cwd=parity)
    assert bert.exit_code == 0, bert.output
    assert "# fdl hf parity bert" in bert.stdout and "echo bert" in bert.stdout
    classify = run_fdl(["classify", "--dry-run"], cwd=project / "hf")
    assert classify.exit_code == 0 and "echo classify" in classify.stdout
    # in a subdirectory of the nested manifest too
    (parity / "scripts").mkdir()
    assert run_fdl(["bert", "--dry-run"], cwd=parity / "scripts").exit_code == 0
    # the manifest of the directory comes first (as with floDl's CLI), with a note
    test = run_fdl(["test", "--dry-run"], cwd=parity)
    assert test.exit_code == 0 and "echo parity-test" in test.stdout
    assert "running `fdl hf parity test` (the manifest of this directory)" in test.stderr
    # the project's own commands still run from anywhere in it
    build = run_fdl(["build", "--dry-run"], cwd=parity)
    assert build.exit_code == 0 and "echo root-build" in build.stdout
    unknown = run_fdl(["nope"], cwd=parity)
    assert unknown.exit_code == 2
    # `fdl --help` there lists them, with the full form
    helped = run_fdl(["--help"], cwd=parity)
    assert "(`fdl <command>` here is `fdl hf parity <command>`)" in helped.stdout
    assert "  bert " in helped.stdout.split("Commands of this directory")[1]
