"""Hostile files where fdl reads: a recipe that is not UTF-8, a tree holding a FIFO, an
.active naming a variant that is gone. Each ends in a documented exit with the fix, and
one broken recipe does not hide the others."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import run_fdl_process
from tests.support.libtorch_trees import make_tree


def _project(tmp_path: Path, manifest: str = "description: x\n") -> Path:
    project = tmp_path / "p"
    (project / "recipes").mkdir(parents=True)
    (project / "fdl.yml").write_text(manifest)
    (project / "recipes" / "latin1.yml").write_bytes(b"description: caf\xe9\n")
    (project / "recipes" / "wrong.yml").write_text("description: 5\n")
    (project / "recipes" / "good.yml").write_text("description: mine\ncpu: true\n")
    return project


def test_a_broken_recipe_does_not_hide_the_others(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project = _project(tmp_path)
    os.mkfifo(project / "recipes" / "pipe.yml")
    result = run_fdl_process(
        ["libtorch", "build", "--list-recipes", "--json"], cwd=project, timeout=60
    )
    assert result.exit_code == 0, result.output
    names = {r["name"] for r in json.loads(result.stdout)}
    assert "good" in names and "cpu" in names and not {"latin1", "wrong"} & names
    assert "latin1.yml: it is not UTF-8 text" in result.stderr
    assert "recipes/wrong.yml:1:14" in result.stderr


def test_a_selected_recipe_that_is_not_utf8_is_a_manifest_error(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project = _project(tmp_path, "libtorch:\n  build:\n    recipe: latin1\n")
    assert run_fdl(["config", "show"], cwd=project).exit_code == 0  # config shows the rest
    result = run_fdl(["libtorch", "build", "--dry-run"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "not UTF-8" in result.output and "fix:" in result.output


def test_install_from_a_tree_holding_a_fifo_is_refused(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree", "2.13.0+cpu")
    os.mkfifo(tree / "lib" / "pipe")
    result = run_fdl_process(
        ["libtorch", "install", "--from-dir", str(tree), "--name", "x"],
        cwd=tmp_path,
        env={"FDL_HOME": str(tmp_path / "home")},
        timeout=60,
    )
    assert result.exit_code == 2, result.output
    assert f"{tree / 'lib' / 'pipe'} is a FIFO" in result.stderr
    assert not (tmp_path / "home" / "libtorch" / "precompiled" / "x").exists()


def test_info_on_a_dangling_active_is_an_error(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    make_tree(home / "libtorch" / "precompiled" / "cpu", "2.13.0+cpu")
    (home / "libtorch" / ".active").write_text("precompiled/gone\n")
    for args in (["libtorch", "info"], ["libtorch", "info", "--json"]):
        result = run_fdl(args, cwd=tmp_path, env={"FDL_HOME": str(home)})
        assert result.exit_code == 4, result.output
        assert "'precompiled/gone'" in result.output and "is not installed" in result.output
        assert "fdl libtorch activate precompiled/cpu" in result.output
