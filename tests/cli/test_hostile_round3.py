"""Round 3 of hostile input, the project's own files (issue "Nothing lost, leaked or injected,
round 3", points 9 and 15): a manifest `path:` with a NUL, an enclosing fdl.yml of 3 GB read
from a nested directory, `fdl add flodl-hf` where `flodl-hf` is a file or a FIFO, and an
overlay that is there but is not a file. Each ended in exit 70 (a bug) or a wrong message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_fdl_process


def test_a_nested_path_with_a_nul_is_a_manifest_error_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text('commands:\n  tool:\n    path: "x\\0y"\n')
    listed = run_fdl_process(["--help"], cwd=tmp_path, timeout=60)
    assert listed.exit_code == 0, listed.output
    assert "fdl.yml:3:11: commands.tool.path" in listed.stdout
    ran = run_fdl_process(["tool"], cwd=tmp_path, timeout=60)
    assert ran.exit_code == 3, ran.output
    assert "fdl.yml:3:11: commands.tool.path" in ran.stderr and "control characters" in ran.stderr


def test_an_enclosing_manifest_too_large_to_read_is_not_read(tmp_path: Path) -> None:
    with (tmp_path / "fdl.yml").open("wb") as huge:
        huge.truncate(3 << 30)  # sparse: 3 GiB that were read whole (MemoryError)
    nested = tmp_path / "train"
    nested.mkdir()
    (nested / "fdl.yml").write_text("commands:\n  hi:\n    run: echo hi\n")
    result = run_fdl_process(["hi"], cwd=nested, timeout=60)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "hi"


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_add_flodl_hf_over_a_file_or_fifo_leaves_it_and_says_so(tmp_path: Path, kind: str) -> None:
    made = run_fdl_process(
        ["init", "p", "--template", "flodl", "--mode", "native", "-y"], cwd=tmp_path, timeout=120
    )
    assert made.exit_code == 0, made.output
    project = tmp_path / "p"
    obstacle = project / "flodl-hf"
    if kind == "file":
        obstacle.write_text("mine\n")
    else:
        os.mkfifo(obstacle)
    result = run_fdl_process(["add", "flodl-hf"], cwd=project, timeout=60)
    assert result.exit_code == 0, result.output
    assert "skipped     flodl-hf/fdl.yml" in result.output
    assert "inside something that is not a directory" in result.output
    assert obstacle.is_fifo() if kind == "fifo" else obstacle.read_text() == "mine\n"


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("fifo", "is a FIFO, not a file"),
        ("dir", "is a directory, not a file"),
        ("link", "is a link to '/nowhere/x' that leads nowhere"),
    ],
)
def test_an_overlay_that_is_not_a_file_is_named_for_what_it_is(
    tmp_path: Path, kind: str, said: str
) -> None:
    (tmp_path / "fdl.yml").write_text("description: x\n")
    overlay = tmp_path / "fdl.prod.yml"
    if kind == "fifo":
        os.mkfifo(overlay)
    elif kind == "dir":
        overlay.mkdir()
    else:
        overlay.symlink_to("/nowhere/x")
    result = run_fdl_process(["@prod", "config", "show"], cwd=tmp_path, timeout=60)
    assert result.exit_code == 3, result.output
    assert f"environment 'prod': {overlay} {said}" in result.stderr
    assert "fix: make fdl.prod.yml a YAML file" in result.stderr


# --- schema probes (point 10, 11) ---------------------------------------------------

PROBE = """#!/bin/sh
if [ "$1" = "--fdl-schema" ]; then
  {before}
  echo '{{"options": {{"rounds": {{"type": "int"}}}}}}'
  exit 0
fi
echo "tool ran $*"
"""


def _tool(root: Path, before: str) -> Path:
    (root / "fdl.yml").write_text("commands:\n  tool:\n    path: ./tool/\n")
    tool = root / "tool"
    tool.mkdir()
    (tool / "fdl.yml").write_text("entry: sh run.sh\ncompile: true\n")
    (tool / "run.sh").write_text(PROBE.format(before=before))
    return tool


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status  # ended, not yet reaped by its new parent


def _pid(path: Path) -> int:
    for _ in range(200):
        if path.is_file() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


@pytest.mark.usefixtures("busy_cores")
@pytest.mark.parametrize("args", [["tool", "--rounds", "2"], ["tool", "--help"]])
def test_a_probe_that_leaves_a_child_holding_its_output_is_ended_with_it(
    tmp_path: Path, args: list[str]
) -> None:
    pidfile = tmp_path / "child.pid"
    _tool(tmp_path, f"sleep 300 & echo $! > {pidfile}")
    # The guard is a deadline: the old code waited the probe's 600 s for the pipe's end.
    result = run_fdl_process(args, cwd=tmp_path, timeout=60)
    assert result.exit_code == 0, result.output
    if args[-1] != "--help":
        assert "tool ran --rounds 2" in result.stdout
    assert _gone(_pid(pidfile)), "the probe's child was left running"


@pytest.mark.usefixtures("busy_cores")
def test_sigterm_during_a_probe_ends_fdl_and_the_probe(tmp_path: Path) -> None:
    pidfile = tmp_path / "probe.pid"
    _tool(tmp_path, f"echo $$ > {pidfile}; sleep 300")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    fdl = subprocess.Popen(
        [sys.executable, "-m", "fdl", "tool", "--rounds", "2"],
        cwd=tmp_path,
        env={**environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    probe = _pid(pidfile)
    fdl.send_signal(signal.SIGTERM)
    out, err = fdl.communicate(timeout=60)
    assert fdl.returncode == 143, err
    assert "tool ran" not in out  # the command did not go on without its schema
    assert _gone(probe)


def test_a_schema_cache_is_never_made_through_a_link_out_of_the_tool(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    tool = _tool(project, "true")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tool / ".fdl").symlink_to(outside)
    result = run_fdl_process(["tool", "--rounds", "2"], cwd=project, timeout=60)
    assert result.exit_code == 0, result.output
    assert "tool ran --rounds 2" in result.stdout
    assert list(outside.iterdir()) == []
