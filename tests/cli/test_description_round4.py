"""Issue 42, point 9 (and 1 for the script): a command's `description` from the manifest
in `--help`, the top-level list and the `--dry-run` script. A token-shaped one is masked as
`config show` masks it; a line break in it never starts a line of the script `sh` would run."""

from __future__ import annotations

import subprocess
from pathlib import Path

TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
MANIFEST = f"""\
commands:
  hello:
    run: echo hi
    description: "{TOKEN}"
  bye:
    run: echo bye
    description: "ok\\ntouch pwned"
"""


def _fdl(run_fdl, tmp_path: Path, *args: str):
    (tmp_path / "fdl.yml").write_text(MANIFEST)
    return run_fdl(list(args), cwd=tmp_path, env={"FDL_CACHE_DIR": str(tmp_path / "cache")})


def test_a_token_shaped_description_is_masked_wherever_it_is_shown(run_fdl, tmp_path) -> None:
    shown = _fdl(run_fdl, tmp_path, "config", "show")
    assert 'description: "***"' in shown.stdout
    for args in (["--help"], ["hello", "--help"], ["hello", "--dry-run"]):
        result = _fdl(run_fdl, tmp_path, *args)
        assert result.exit_code == 0, result.output
        assert "***" in result.output, args
        assert TOKEN not in result.output, args


def test_a_description_s_line_break_stays_in_the_script_s_comment(run_fdl, tmp_path) -> None:
    result = _fdl(run_fdl, tmp_path, "bye", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "# fdl bye: ok touch pwned"  # one line
    done = subprocess.run(["sh"], input=result.stdout, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "bye\n"
    assert not (tmp_path / "pwned").exists()
