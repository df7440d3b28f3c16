"""A full disk names the file fdl was writing (write() raises ENOSPC without a file name):
exit 4, the path and the fix."""

from __future__ import annotations

import sys
from pathlib import Path

from fdl.libtorch import variants
from fdl.paths import Context
from tests.conftest import run_fdl_process
from tests.integration.test_disk_full_and_signals import fill, small_disk
from tests.support.libtorch_trees import make_tree

__all__ = ["small_disk"]  # the fixture, shared with the disk-full tests


def test_activate_on_a_full_disk_names_the_file(small_disk: Path, tmp_path: Path) -> None:
    home = small_disk / "home"
    for name in ("a", "b"):
        make_tree(home / "libtorch" / "precompiled" / name, "2.13.0+cpu")
    variants.activate(Context(home, project=False), "precompiled/a")
    fill(small_disk)
    result = run_fdl_process(
        ["libtorch", "activate", "precompiled/b"], cwd=tmp_path, env={"FDL_HOME": str(home)}
    )
    assert result.exit_code == 4, result.output
    assert f"cannot use {home / 'libtorch' / '.active'}: No space left" in result.stderr


def test_bench_results_on_a_full_disk_name_the_file(small_disk: Path) -> None:
    project = small_disk / "p"
    project.mkdir()
    (project / "prog.py").write_text("print('ms: 1.5')\n")
    (project / "fdl.yml").write_text(
        f"bench:\n  b:\n    run: [{sys.executable}, prog.py]\n    rounds: 1\n    warmup: 0\n"
    )
    fill(small_disk)
    result = run_fdl_process(["bench", "run", "-o", "out.jsonl"], cwd=project)
    assert result.exit_code == 4, result.output
    assert f"cannot use {project / 'out.jsonl'}: No space left" in result.stderr
