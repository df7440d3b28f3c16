"""`fdl bench run` under pressure, with real processes: a round's process group ended on
timeout and on SIGTERM, a catastrophic figure regex bounded, runs sharing a results file,
a killed run's git worktree pruned, and what issue 29 asked of the run: CPU time per
round, paired ratios, prepare/setup/cleanup, the schedule, --json, incomplete runs,
units, CSV and Markdown exports. No assertion depends on how long anything took."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.integration.test_bench_run import _env, _fdl, _git, _records

# Starts a grandchild that would outlive the round, writes its pid, then waits.
SPAWNER = """\
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(float(sys.argv[2]))
print("ms: 5")
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _gone(pid: int) -> bool:
    """Checked the instant fdl has exited: it waits until its rounds' groups have ended."""
    return not _alive(pid)


def _write(tmp_path: Path, manifest: str) -> Path:
    (tmp_path / "spawner.py").write_text(SPAWNER)
    (tmp_path / "fdl.yml").write_text(textwrap.dedent(manifest))
    return tmp_path


@pytest.mark.usefixtures("busy_cores")
def test_a_timed_out_round_ends_its_process_group(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        f"""\
        bench:
          slow:
            run: [{sys.executable}, spawner.py, pid, "300"]
            warmup: 0
            rounds: 1
            timeout: 1
        """,
    )
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 1, done.stderr
    assert "did not finish within 1 s" in done.stderr
    assert _gone(int((project / "pid").read_text()))


@pytest.mark.usefixtures("busy_cores")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_fdl_ends_the_rounds_process_group(tmp_path: Path, signum: int) -> None:
    project = _write(
        tmp_path,
        f"""\
        bench:
          slow:
            run: [{sys.executable}, spawner.py, pid, "300"]
            warmup: 0
            rounds: 1
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "bench", "run", "-o", "out.jsonl"],
        cwd=project,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = project / "pid"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert _gone(grandchild)


def test_a_backtracking_figure_regex_is_refused_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "say.py").write_text("print('a' * 40 + '!')\n")
    manifest = f"""\
        bench:
          b:
            run: [{sys.executable}, say.py]
            warmup: 0
            rounds: 1
            figures:
              n: '{{pattern}}'
        """
    # The classic shape is refused before anything runs, at its line.
    (tmp_path / "fdl.yml").write_text(textwrap.dedent(manifest.format(pattern="^(a+)+$")))
    refused = _fdl(tmp_path, "bench", "run", "-o", "out.jsonl")
    assert refused.returncode == 3, refused.stderr
    assert "fdl.yml:7" in refused.stderr and "exponential" in refused.stderr
    # Another slow shape gets past the check: the time bound ends it with exit 3.
    from fdl.bench import plan_benchmarks
    from fdl.bench._run import parse_figures
    from fdl.errors import ManifestError
    from fdl.manifest import load_manifest

    (tmp_path / "fdl.yml").write_text(
        textwrap.dedent(manifest.format(pattern="^(?:a|aa)*([0-9]+)$"))
    )
    bench = plan_benchmarks(load_manifest(manifest=tmp_path / "fdl.yml"))[0]
    with pytest.raises(ManifestError, match=r"did not finish within 0\.5 s") as caught:
        parse_figures("a" * 60 + "!", bench, limit=0.5)
    assert caught.value.location is not None and caught.value.location.line == 7
    assert parse_figures("aa12", bench) == {"n": 12.0}


def test_clock_must_be_positive(tmp_path: Path) -> None:
    _write(tmp_path, f"bench:\n  b:\n    run: [{sys.executable}, spawner.py]\n")
    done = _fdl(tmp_path, "bench", "run", "--publish", "--clock", "-5", "--dry-run")
    assert done.returncode == 2 and "-5" in done.stderr


COUNTER = """\
import pathlib, sys, time
side = sys.argv[1]
out = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else None
if out is not None and not pathlib.Path("intruded").exists():
    # another run appends its header to the same file meanwhile
    pathlib.Path("intruded").write_text("1")
    with out.open("a") as f:
        f.write('{"type": "run", "run": "other", "format": 2, "benchmarks": []}\\n')
t = time.process_time()
while time.process_time() - t < (0.05 if side == "a" else 0.1):
    pass
print("done")
"""


def _counter(tmp_path: Path, extra: str = "", intrude: bool = False) -> Path:
    (tmp_path / "work.py").write_text(COUNTER)
    target = ', "out.jsonl"' if intrude else ""
    (tmp_path / "fdl.yml").write_text(
        textwrap.dedent(
            f"""\
            bench:
              w:
                run: [{sys.executable}, work.py]
                compare:
                  a: {{args: [a{target}]}}
                  b: {{args: [b{target}]}}
                warmup: 0
                rounds: 3
                metric: cpu_s
            """
        )
        + extra
    )
    return tmp_path


def test_the_report_after_a_run_is_this_runs_whatever_else_appends(tmp_path: Path) -> None:
    project = _counter(tmp_path, intrude=True)
    done = _fdl(project, "bench", "run", "-o", "out.jsonl", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["run"] != "other" and report["complete"] is True
    sides = report["benchmarks"][0]["sides"]
    assert sides["a"]["n"] == 3 and sides["b"]["n"] == 3


def test_three_runs_at_once_keep_every_record_whole(tmp_path: Path) -> None:
    project = _counter(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "fdl", "bench", "run", "-o", "same.jsonl", "--json"],
            cwd=project,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    runs = {json.loads(out)["run"] for out, _ in outs}
    assert len(runs) == 3
    for out, _ in outs:
        assert json.loads(out)["benchmarks"][0]["sides"]["a"]["n"] == 3
    records = _records(project / "same.jsonl")
    assert len(records) == 3 * 7


def test_cpu_time_is_recorded_and_usable_as_the_metric(tmp_path: Path) -> None:
    project = _counter(tmp_path)
    done = _fdl(project, "bench", "run", "-o", "out.jsonl", "--json")
    assert done.returncode == 0, done.stderr
    rounds = [r for r in _records(project / "out.jsonl") if r["type"] == "round"]
    for r in rounds:
        assert r["cpu_s"] == pytest.approx(r["user_s"] + r["system_s"])
        assert float(r["cpu_s"]) >= (0.05 if r["side"] == "a" else 0.1)
    bench = json.loads(done.stdout)["benchmarks"][0]
    assert bench["metric"] == "cpu_s" and bench["unit"] == "s"
    assert bench["ratios"]["b"]["value"] > 1 and bench["paired_ratios"]["b"]["value"] > 1
    p = bench["paired_ratios"]["b"]
    assert p["low"] <= p["value"] <= p["high"]
    assert "cpu 0." in done.stderr and "round 3" in done.stderr


def test_dry_run_prints_the_schedule_and_the_hooks(tmp_path: Path) -> None:
    project = _counter(tmp_path, extra='    prepare: ["true"]\n')
    done = _fdl(project, "bench", "run", "--dry-run", "--setup", "echo hi")
    assert done.returncode == 0, done.stderr
    assert "round 1: a b" in done.stdout and "round 2: b a" in done.stdout
    assert "round 3: a b" in done.stdout
    assert "prepare: true" in done.stdout and "setup: echo hi" in done.stdout


def test_prepare_setup_and_cleanup_run_when_hyperfine_runs_them(tmp_path: Path) -> None:
    project = _counter(
        tmp_path,
        extra=f"""\
    warmup_seconds: 0
    prepare: [{sys.executable}, -c, "open('log', 'a').write('p')"]
    setup: [{sys.executable}, -c, "open('log', 'a').write('S')"]
    cleanup: [{sys.executable}, -c, "open('log', 'a').write('C')"]
""",
    )
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    # setup per side, prepare before each of 3 rounds x 2 sides, cleanup per side
    assert (project / "log").read_text() == "SS" + "p" * 6 + "CC"


def test_a_stopped_run_is_incomplete_and_exports_carry_units(tmp_path: Path) -> None:
    project = _counter(tmp_path, extra="    units: {ms: ms}\n")
    records = tmp_path / "out.jsonl"
    done = _fdl(project, "bench", "run", "-o", str(records))
    assert done.returncode == 0, done.stderr
    lines = records.read_text().splitlines()
    records.write_text("\n".join(lines[:-2]) + "\n")  # the last two rounds never ran
    report = _fdl(project, "bench", "report", str(records), "--csv", "t.csv", "--markdown", "t.md")
    assert report.returncode == 0, report.stderr
    assert "w: incomplete, the run stopped early (a 2, b 2 of 3 rounds)" in report.stdout
    assert "| w | a | cpu_s (s) |" in report.stdout and " s ± " in report.stdout
    rows = list(csv.DictReader((project / "t.csv").open()))
    assert [r["side"] for r in rows] == ["a", "b"]
    assert rows[0]["unit"] == "s" and rows[0]["complete"] == "false" and rows[1]["paired_ratio"]
    assert (project / "t.md").read_text() == report.stdout
    again = _fdl(project, "bench", "report", str(records), "--csv", "t.csv")
    assert again.returncode == 2 and "exists" in again.stderr
    as_json = json.loads(_fdl(project, "bench", "report", str(records), "--json").stdout)
    assert as_json["complete"] is False


def test_a_worktree_left_by_a_killed_run_is_pruned(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        f"""\
        bench:
          r:
            run: [{sys.executable}, spawner.py, pid, "300"]
            compare:
              head: {{revision: HEAD}}
            warmup: 0
            rounds: 1
        """,
    )
    _git(project)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "bench", "run", "-o", str(tmp_path / "out.jsonl")],
        cwd=project,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    listed = ""
    while time.monotonic() < deadline:
        listed = subprocess.run(
            ["git", "worktree", "list"], cwd=project, capture_output=True, text=True
        ).stdout
        if len(listed.splitlines()) == 2 and list(Path("/tmp").glob("fdl-bench-*/0/pid")):
            break
        time.sleep(0.05)
    proc.kill()  # SIGKILL: nothing is cleaned up
    proc.wait()
    left = Path(listed.splitlines()[1].split()[0])
    assert left.is_dir()
    for pid in left.glob("pid"):
        os.kill(int(pid.read_text()), signal.SIGKILL)
    (project / "fdl.yml").write_text(
        (project / "fdl.yml").read_text().replace('pid, "300"', 'pid, "0"')
    )
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "quick"],
        cwd=project,
        check=True,
    )
    done = _fdl(project, "bench", "run", "-o", str(tmp_path / "out.jsonl"))
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=project, capture_output=True, text=True
    ).stdout
    assert len(listed.splitlines()) == 1, listed
    assert not left.exists()


def test_an_unclosed_quote_in_a_command_is_a_manifest_or_usage_error(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text('bench:\n  b:\n    run: [python3]\n    prepare: "x \'y"\n')
    done = _fdl(tmp_path, "bench", "run", "--dry-run")
    assert done.returncode == 3 and "fdl.yml:4" in done.stderr, done.stderr
    (tmp_path / "fdl.yml").write_text('bench:\n  b:\n    run: "python3 \'y"\n')
    assert _fdl(tmp_path, "bench", "run", "--dry-run").returncode == 3
    (tmp_path / "fdl.yml").write_text("bench:\n  b:\n    run: [python3]\n")
    option = _fdl(tmp_path, "bench", "run", "--dry-run", "--cleanup", "'")
    assert option.returncode == 2 and "--cleanup" in option.stderr


def test_a_hostile_round_count_is_refused_and_a_large_one_is_planned_in_linear_time(
    tmp_path: Path,
) -> None:
    project = _counter(tmp_path)
    done = _fdl(project, "--set", "bench.w.rounds=1000000000000", "bench", "run", "--dry-run")
    assert done.returncode == 3, done.stderr  # was a schedule filling memory until OOM
    assert "bench.w.rounds" in done.stderr and "at most 100000" in done.stderr
    done = _fdl(project, "bench", "run", "--dry-run", "--json", "-n", "100000")
    assert done.returncode == 0, done.stderr
    rounds = json.loads(done.stdout)["schedule"]["w"]
    assert len(rounds) == 100_000 and rounds[-1] == ["b", "a"]
    text = _fdl(project, "bench", "run", "--dry-run", "-n", "100000")
    assert "round 6: b a" in text.stdout and "round 7:" not in text.stdout
    assert "... the same rotation to round 100000" in text.stdout
