"""From inside a nested manifest's directory, the project is the enclosing manifest."""

from __future__ import annotations

from pathlib import Path

from fdl.tasks import enclosing_manifest
from tests.support.tasks_helpers import write


def test_convention_and_path_commands_make_nested_manifests(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "fdl.yml": "commands:\n  train:\n  tools: {path: ../side/tools}\n",
            "train/fdl.yml": "entry: x\ncommands:\n  deep: {}\n",
            "train/deep/fdl.yml": "entry: y\n",
        },
    )
    write(tmp_path.parent, {"side/tools/fdl.yml": "commands: {}\n"})
    root = tmp_path / "fdl.yml"
    assert enclosing_manifest(tmp_path / "train" / "fdl.yml") == root
    assert enclosing_manifest(tmp_path / "train" / "deep" / "fdl.yml") == root
    assert enclosing_manifest(root) == root


def test_unrelated_manifests_below_a_project_are_their_own_root(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "fdl.yml": "commands:\n  other: {run: echo}\n  build: {run: make}\n",
            "other/fdl.yml": "commands: {}\n",
            "vendor/lib/fdl.yml": "commands: {}\n",
        },
    )
    assert enclosing_manifest(tmp_path / "other" / "fdl.yml") == tmp_path / "other" / "fdl.yml"
    lib = tmp_path / "vendor" / "lib" / "fdl.yml"
    assert enclosing_manifest(lib) == lib


def test_unreadable_parent_manifest_keeps_the_nearest(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "commands: [\n", "train/fdl.yml": "entry: x\n"})
    nested = tmp_path / "train" / "fdl.yml"
    assert enclosing_manifest(nested) == nested
