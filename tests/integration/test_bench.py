"""`fdl bench` with real processes: interleaved rounds, robust statistics, results kept
when a run is interrupted, the regression check, and --publish around a fake nvidia-smi."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

PROGRAM = """#!/bin/sh
# prints its own figure; round 6 of each side is a spike (a GC pause)
f="counter-$1"
n=$(cat "$f" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$f"
v=$2
[ "$n" -eq 6 ] && v=$(( $2 * 4 ))
echo "epoch done"
echo "ms/epoch: $v.$((n % 3))"
"""

MANIFEST = """\
commands: {}
bench:
  epoch:
    description: one epoch
    run: ./prog.sh a 100
    sides:
      cpu: {run: ./prog.sh cpu 100}
      fast: {run: ./prog.sh fast 50}
    rounds: 10
    warmup: 1
    metric: {regex: 'ms/epoch: ([0-9.]+)', unit: ms}
    threshold: {percent: 5, mads: 3}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text(MANIFEST)
    program = tmp_path / "prog.sh"
    program.write_text(PROGRAM)
    program.chmod(0o755)
    return tmp_path


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rounds_interleave_and_the_scaled_mad_ignores_the_spike(run_fdl, project) -> None:
    result = run_fdl(["bench", "run", "--json"], cwd=project)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    lines = rows(Path(out["results"]))
    assert lines[0]["kind"] == "environment" and lines[0]["fdl"]
    rounds = [r for r in lines if r["kind"] == "round"]
    assert len(rounds) == 2 * 11
    # A B, then B A, then A B ...: each round has both sides, the order rotates
    order = [r["side"] for r in rounds]
    assert order[:6] == ["cpu", "fast", "fast", "cpu", "cpu", "fast"]
    assert [r["warmup"] for r in rounds[:2]] == [True, True]
    cpu = next(b for b in out["benchmarks"] if b["side"] == "cpu")
    fast = next(b for b in out["benchmarks"] if b["side"] == "fast")
    assert cpu["n"] == 10 and 100.0 <= cpu["median"] <= 100.2
    assert cpu["scaled_mad"] < 2 and cpu["stdev"] > 50  # the spike: stddev, not MAD
    assert len(cpu["outliers"]) == 1
    assert 0.45 < fast["ratio"]["value"] < 0.55
    assert fast["ratio"]["low"] <= fast["ratio"]["value"] <= fast["ratio"]["high"]
    table = run_fdl(["bench", "report"], cwd=project)
    assert table.exit_code == 0 and "| epoch | fast |" in table.stdout


def test_compare_finds_a_regression(run_fdl, project, tmp_path) -> None:
    base = tmp_path / "base.jsonl"
    assert run_fdl(["bench", "run", "-o", str(base)], cwd=project).exit_code == 0
    same = tmp_path / "same.jsonl"
    for name in ("counter-cpu", "counter-fast"):
        (project / name).unlink()
    assert run_fdl(["bench", "run", "-o", str(same)], cwd=project).exit_code == 0
    assert run_fdl(["bench", "compare", str(base), str(same)], cwd=project).exit_code == 0
    (project / "fdl.yml").write_text(MANIFEST.replace("./prog.sh fast 50", "./prog.sh fast 60"))
    slow = tmp_path / "slow.jsonl"
    for name in ("counter-cpu", "counter-fast"):
        (project / name).unlink()
    assert run_fdl(["bench", "run", "-o", str(slow)], cwd=project).exit_code == 0
    checked = run_fdl(["bench", "compare", str(base), str(slow), "--json"], cwd=project)
    assert checked.exit_code == 1
    verdicts = {(r["bench"], r["side"]): r["regression"] for r in json.loads(checked.stdout)}
    assert verdicts == {("epoch", "cpu"): False, ("epoch", "fast"): True}


def test_an_interrupted_run_keeps_its_rounds(project) -> None:
    (project / "fdl.yml").write_text(
        MANIFEST.replace("./prog.sh fast 50", "sh -c 'sleep 0.2; ./prog.sh fast 50'")
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    out = project / "results.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "bench", "run", "-o", str(out)],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out.exists() and sum(1 for r in rows_safe(out) if r.get("kind") == "round") >= 6:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    kept = [r for r in rows_safe(out) if r.get("kind") == "round"]
    assert 6 <= len(kept) < 22
    report = subprocess.run(
        [sys.executable, "-m", "fdl", "bench", "report", str(out), "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["benchmarks"]


def rows_safe(path: Path) -> list[dict]:
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def test_a_failing_round_stops_the_run_and_keeps_the_rest(run_fdl, project) -> None:
    (project / "fdl.yml").write_text(MANIFEST.replace("./prog.sh fast 50", "exit 3"))
    out = project / "r.jsonl"
    result = run_fdl(["bench", "run", "-o", str(out)], cwd=project)
    assert result.exit_code == 1
    assert "side fast" in result.stderr and "exited with status 3" in result.stderr
    assert [r["exit_code"] for r in rows(out) if r["kind"] == "round"] == [0, 3]


NVIDIA_SMI = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls.log"
case "$*" in
  *query-compute-apps*) cat "$(dirname "$0")/busy" 2>/dev/null ;;
  *clocks.max.sm*) echo "0, 3105" ;;
  *) ;;
esac
"""


def test_publish_locks_and_restores_the_clocks(run_fdl, project, tmp_path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    git = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    (project / ".gitignore").write_text("counter-*\n.fdl/\nbin/\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=project, env={**os.environ, **git}, check=True)
    (project / "notes.txt").write_text("uncommitted\n")
    dirty = run_fdl(["bench", "run", "--publish", "-n", "2"], cwd=project)
    assert dirty.exit_code == 2 and "clean git tree" in dirty.stderr
    subprocess.run(["git", "add", "."], cwd=project, check=True)
    subprocess.run(
        ["git", "commit", "-qm", "y"], cwd=project, env={**os.environ, **git}, check=True
    )
    done = run_fdl(["bench", "run", "--publish", "-n", "2"], cwd=project)
    assert done.exit_code == 0, done.output
    calls = (bin_dir / "calls.log").read_text().splitlines()
    assert "-i 0 -lgc 3105,3105" in calls and calls[-1] == "-i 0 -rgc"
    (bin_dir / "busy").write_text("4242, python\n")
    busy = run_fdl(["bench", "run", "--publish", "-n", "2"], cwd=project)
    assert busy.exit_code == 4 and "4242" in busy.stderr


def test_publish_without_gpus_says_what_it_would_do(run_fdl, project) -> None:
    git = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    (project / ".gitignore").write_text("counter-*\n.fdl/\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=project, env={**os.environ, **git}, check=True)
    result = run_fdl(
        ["bench", "run", "--publish", "-n", "2"], cwd=project, env={"PATH": "/usr/bin:/bin"}
    )
    assert result.exit_code == 0, result.output
    assert "--publish would lock each GPU's clocks" in result.stderr
