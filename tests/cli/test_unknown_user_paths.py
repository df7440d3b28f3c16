"""A path written `~name/...` for a user this machine lacks (the manifest fuzzer found
`inherit-from: ~dl.yml`): pathlib's expanduser raised RuntimeError, exit 70. fdl expands
with os.path's rule (an unknown user leaves the path as written), so it is an ordinary
missing file: exit 3 naming the file:line:col and the path."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("target", ["~dl.yml", "~no-such-user-here/base.yml"])
def test_inherit_from_a_path_of_an_unknown_user_is_a_missing_file(
    run_fdl, tmp_path: Path, target: str
) -> None:
    (tmp_path / "fdl.yml").write_text(f"inherit-from: {target}\n")
    result = run_fdl(["config", "show"], cwd=tmp_path)
    assert result.exit_code == 3, result.output
    assert f"fdl.yml:1:15: inherit-from target {target} does not exist" in result.output
    assert "internal error" not in result.output


def test_the_same_file_written_beside_the_manifest_is_inherited(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "~dl.yml").write_text("description: from the file named ~dl.yml\n")
    (tmp_path / "fdl.yml").write_text("inherit-from: ~dl.yml\n")
    result = run_fdl(["config", "show"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "from the file named ~dl.yml" in result.output
