"""``fdl add flodl-hf`` pins flodl-hf (and the playground's flodl) to the project's own
floDl release, as floDl's ``fdl add`` does (flodl-cli 0.8.0 src/add.rs:127-146): a project
that moved to floDl 0.8.0 gets ``flodl-hf = "=0.8.0"``, not the release the template wrote
when the project was made."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

FLODL_NATIVE = ["-t", "flodl", "-m", "native", "--gpus", "none"]
LOCK = 'version = 4\n\n[[package]]\nname = "flodl"\nversion = "{}"\n'


def _pins(project: Path) -> dict[str, str]:
    text = (project / "flodl-hf" / "Cargo.toml").read_text()
    return dict(re.findall(r'(?m)^(flodl(?:-hf)?) = "([^"]*)"', text))


def _made(tmp_path: Path, run_fdl, flodl: str) -> Path:
    assert run_fdl(["init", "p", *FLODL_NATIVE], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    cargo = project / "Cargo.toml"
    cargo.write_text(re.sub(r'(?m)^flodl = "[^"]*"', f'flodl = "{flodl}"', cargo.read_text()))
    return project


def test_flodl_hf_is_pinned_to_the_release_in_the_projects_cargo_toml(
    tmp_path: Path, run_fdl
) -> None:
    project = _made(tmp_path, run_fdl, "0.8.0")
    cargo_before = (project / "Cargo.toml").read_text()
    added = run_fdl(["add", "flodl-hf"], cwd=project)
    assert added.exit_code == 0, added.output
    assert _pins(project) == {"flodl": "=0.8.0", "flodl-hf": "=0.8.0"}
    assert (project / "Cargo.toml").read_text() == cargo_before  # the user's, kept
    answers = yaml.safe_load((project / ".fdl-answers.yml").read_text())["answers"]
    assert answers["flodl"] == "0.8.0"


def test_the_release_cargo_resolved_wins_over_the_requirement(tmp_path: Path, run_fdl) -> None:
    project = _made(tmp_path, run_fdl, "0.7")
    (project / "Cargo.lock").write_text(LOCK.format("0.7.0"))
    preview = run_fdl(["add", "flodl-hf", "--dry-run"], cwd=project)
    assert preview.exit_code == 0, preview.output
    assert "conflict" not in preview.stdout
    assert not (project / "flodl-hf").exists()
    assert run_fdl(["add", "flodl-hf"], cwd=project).exit_code == 0
    assert _pins(project) == {"flodl": "=0.7.0", "flodl-hf": "=0.7.0"}
    assert "`=0.7.0`" in (project / "flodl-hf" / "README.md").read_text()


def test_a_hostile_release_in_the_lock_is_not_written_into_the_crate(
    tmp_path: Path, run_fdl
) -> None:
    project = _made(tmp_path, run_fdl, "0.8.0")
    (project / "Cargo.lock").write_text(LOCK.format('0.8.0"\\nevil = "1'))
    assert run_fdl(["add", "flodl-hf"], cwd=project).exit_code == 0
    assert _pins(project) == {"flodl": "=0.8.0", "flodl-hf": "=0.8.0"}  # from Cargo.toml
    assert "evil" not in (project / "flodl-hf" / "Cargo.toml").read_text()
