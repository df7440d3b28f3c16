"""`fdl bench` end to end with real processes: figures the program prints itself,
interleaving in the JSON Lines, an interrupted run, compare's exit codes, --publish
with a fake nvidia-smi. No assertion depends on how long anything took."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# Prints its own "ms/epoch" figure: BASE (from argv) plus a small deterministic jitter,
# and a 10x spike on every 5th call of a side (a GC pause, as in the references).
PROGRAM = """\
import json, os, pathlib, sys, time
if "LIBTORCH" in os.environ:
    keys = ("LIBTORCH", "LD_LIBRARY_PATH")
    pathlib.Path("seen.json").write_text(json.dumps({k: os.environ.get(k) for k in keys}))
side, base = sys.argv[1], float(sys.argv[2])
sleep = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
counter = pathlib.Path(f"count-{side}")
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
time.sleep(sleep)
value = base * 10 if n % 5 == 4 else base + (n % 3 - 1) * base / 100
print(f"epoch done; ms/epoch: {value:.3f}")
"""


def _project(tmp_path: Path, bench: str) -> Path:
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "fdl.yml").write_text(textwrap.dedent(bench))
    return tmp_path


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    env.update(extra or {})
    return env


def _fdl(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fdl", *args],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _records(path: Path) -> list[dict[str, object]]:
    # Nothing but the standard library reads the format back.
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


TWO_SIDES = f"""\
bench:
  epoch:
    run: [{sys.executable}, prog.py]
    compare:
      fast: {{args: [fast, "100"]}}
      slow: {{args: [slow, "120"]}}
    rounds: 10
    warmup: 1
    figures:
      ms_epoch: 'ms/epoch: ([0-9.]+)'
"""


def test_run_interleaves_records_rounds_and_reports_a_tight_mad(tmp_path: Path) -> None:
    project = _project(tmp_path, TWO_SIDES)
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    assert "warm-up" in done.stderr and "round 10" in done.stderr
    records = _records(project / "out.jsonl")
    header, rounds = records[0], records[1:]
    assert header["type"] == "run" and header["format"] == 2
    env = header["environment"]
    assert isinstance(env, dict) and {"cpu", "gpus", "git", "fdl", "libtorch"} <= set(env)
    assert len(rounds) == 20 and all(r["run"] == header["run"] for r in rounds)
    # Interleaved and rotated: round 1 runs fast then slow, round 2 slow then fast, ...
    # (numbered from 1, as on the terminal)
    order = [(r["round"], r["side"]) for r in rounds]
    assert order[:4] == [(1, "fast"), (1, "slow"), (2, "slow"), (2, "fast")]
    assert [s for _, s in order].count("fast") == 10
    # The warm-up round (the counter's first call) was not recorded: call 1 onwards,
    # so the spikes (calls 4 and 9) are rounds 3 and 8 of each side.
    fast = [r["figures"]["ms_epoch"] for r in rounds if r["side"] == "fast"]  # type: ignore[index]
    assert fast[3] == 1000.0 and fast[8] == 1000.0
    report = json.loads(_fdl(project, "bench", "report", "out.jsonl", "--json").stdout)
    sides = report["benchmarks"][0]["sides"]
    for name, base in (("fast", 100.0), ("slow", 120.0)):
        s = sides[name]
        assert s["n"] == 10
        assert abs(s["median"] - base) <= base / 100
        # Two spikes of 10x: the stddev explodes, the scaled MAD stays at the jitter.
        assert s["scaled_mad"] <= 1.5 * base / 100
        assert s["stddev"] > 100 * s["scaled_mad"]
        assert len(s["outliers"]) == 2
    r = report["benchmarks"][0]["ratios"]["slow"]
    # The point estimate ignores the spikes; the interval stays honest about them (a
    # resample of 10 rounds holding 5 of the 20 % spikes is not rare), so only contains it.
    assert r["value"] == pytest.approx(1.2, rel=0.02)
    assert r["low"] <= r["value"] <= r["high"]
    table = _fdl(project, "bench", "report", "out.jsonl").stdout
    assert "| epoch | slow | ms_epoch |" in table and "baseline" in table


def test_an_interrupted_run_keeps_its_rounds(tmp_path: Path) -> None:
    bench = TWO_SIDES.replace('"100"]', '"100", "0.2"]').replace('"120"]', '"120", "0.2"]')
    project = _project(tmp_path, bench.replace("rounds: 10", "rounds: 500"))
    out = project / "out.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "bench", "run", "-o", str(out)],
        cwd=project,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and len(out.read_text().splitlines()) >= 5:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    rounds = [r for r in _records(out) if r["type"] == "round"]
    assert 4 <= len(rounds) < 1000
    report = _fdl(project, "bench", "report", "out.jsonl", "--json")
    assert report.returncode == 0, report.stderr
    sides = json.loads(report.stdout)["benchmarks"][0]["sides"]
    assert sides["fast"]["n"] + sides["slow"]["n"] == len(rounds)


ONE_SIDE = f"""\
bench:
  epoch:
    run: [{sys.executable}, prog.py, BASE, "{{base}}"]
    rounds: 10
    warmup: 0
    figures:
      ms_epoch: 'ms/epoch: ([0-9.]+)'
"""


def _run_one(tmp_path: Path, name: str, base: float) -> Path:
    project = tmp_path / name
    project.mkdir()
    _project(project, ONE_SIDE.replace("BASE", name).replace("{base}", str(base)))
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    return project / "out.jsonl"


def test_compare_exits_1_on_a_slowdown_and_0_on_noise(tmp_path: Path) -> None:
    baseline = _run_one(tmp_path, "base", 100.0)
    same = _run_one(tmp_path, "same", 100.5)  # within the 1 % jitter: noise
    slower = _run_one(tmp_path, "slower", 150.0)  # 1.5x
    ok = _fdl(tmp_path, "bench", "compare", str(baseline), str(same))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _fdl(tmp_path, "bench", "compare", str(baseline), str(slower), "--json")
    assert bad.returncode == 1, bad.stderr
    verdict = json.loads(bad.stdout)["verdicts"][0]
    assert verdict["slower"] and verdict["percent"] == pytest.approx(50.0)
    # Nothing in common is not a pass: CI must not go green on the wrong file.
    other = tmp_path / "other.jsonl"
    other.write_text(baseline.read_text().replace('"epoch"', '"other"'))
    none = _fdl(tmp_path, "bench", "compare", str(baseline), str(other))
    assert none.returncode == 2 and "no benchmark side in common" in none.stderr


def test_a_failing_round_stops_the_run_and_keeps_the_rounds_before_it(tmp_path: Path) -> None:
    project = _project(tmp_path, TWO_SIDES.replace("warmup: 1", "warmup: 0"))
    # The fast side's third call fails.
    (project / "prog.py").write_text(
        PROGRAM.replace(
            "counter.write_text",
            "sys.exit(7) if n == 2 and side == 'fast' else None\ncounter.write_text",
        )
    )
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 1 and "7" in done.stderr
    rounds = [r for r in _records(project / "out.jsonl") if r["type"] == "round"]
    # fast slow | slow fast | (fast fails): four rounds kept.
    assert [r["side"] for r in rounds] == ["fast", "slow", "slow", "fast"]


def test_a_bad_regex_is_a_manifest_error_at_its_line(tmp_path: Path) -> None:
    project = _project(tmp_path, TWO_SIDES.replace("'ms/epoch: ([0-9.]+)'", "'ms/(epoch'"))
    done = _fdl(project, "bench", "run", "--dry-run")
    assert done.returncode == 3
    assert "fdl.yml:10:17" in done.stderr and "bench.epoch.figures.ms_epoch" in done.stderr


def test_an_unknown_key_is_reported_with_its_place(tmp_path: Path) -> None:
    project = _project(tmp_path, TWO_SIDES.replace("rounds: 10", "roundz: 10"))
    done = _fdl(project, "bench", "run", "--dry-run")
    assert done.returncode == 3
    assert "fdl.yml:7:5" in done.stderr and "did you mean 'rounds'" in done.stderr


FAKE_SMI = """\
#!/bin/sh
echo "$@" >> "{log}"
case "$*" in
  *query-compute-apps*) cat "{apps}" 2>/dev/null ;;
  *clocks.max.sm*nounits*) echo 1800 ;;
  *query-gpu*) echo "Fake GPU, 550.00, 1500 MHz, 5000 MHz, 1800 MHz, 40" ;;
esac
"""


def _git(project: Path) -> None:
    for argv in (
        ["git", "init", "-q"],
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"],
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"],
    ):
        subprocess.run(argv, cwd=project, check=True)


def _fake_smi(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, apps = tmp_path / "smi.log", tmp_path / "apps.txt"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(log=log, apps=apps))
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    return _env({"PATH": f"{bin_dir}:{os.environ['PATH']}"}), log, apps


def test_publish_locks_and_restores_clocks(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    _project(project, TWO_SIDES.replace("rounds: 10", "rounds: 2"))
    (project / ".gitignore").write_text("count-*\n*.jsonl\n.fdl/\n")
    _git(project)
    env, log, _ = _fake_smi(tmp_path)
    done = _fdl(project, "bench", "run", "--publish", "-o", "out.jsonl", env=env)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    lock = calls.index("-lgc 1800,1800")
    assert calls[-1] == "-rgc" and lock < len(calls) - 1
    header = _records(project / "out.jsonl")[0]
    assert header["publish"]["lock"] == ["nvidia-smi", "-lgc", "1800,1800"]  # type: ignore[index]
    assert header["environment"]["gpus"][0]["name"] == "Fake GPU"  # type: ignore[index]


def test_publish_restores_clocks_when_interrupted(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    bench = TWO_SIDES.replace('"100"]', '"100", "0.2"]').replace("rounds: 10", "rounds: 500")
    _project(project, bench)
    (project / ".gitignore").write_text("count-*\n*.jsonl\n")
    _git(project)
    env, log, _ = _fake_smi(tmp_path)
    out = project / "out.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "bench", "run", "--publish", "-o", str(out)],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        out.exists() and len(out.read_text().splitlines()) >= 3
    ):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert log.read_text().splitlines()[-1] == "-rgc"


def test_publish_refuses_dirty_trees_and_busy_gpus(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    _project(project, TWO_SIDES)
    _git(project)
    env, log, apps = _fake_smi(tmp_path)
    apps.write_text("4242, python3\n")
    busy = _fdl(project, "bench", "run", "--publish", "--dry-run", env=env)
    assert busy.returncode == 4 and "4242" in busy.stderr
    (project / "prog.py").write_text("changed")
    dirty = _fdl(project, "bench", "run", "--publish", "--dry-run", env=env)
    assert dirty.returncode == 2 and "clean git tree" in dirty.stderr
    assert "-lgc" not in log.read_text()


def test_publish_without_gpus_says_what_it_would_do(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    _project(project, TWO_SIDES)
    _git(project)
    path = ":".join(
        p for p in os.environ["PATH"].split(":") if not (Path(p) / "nvidia-smi").exists()
    )
    done = _fdl(project, "bench", "run", "--publish", "--dry-run", env=_env({"PATH": path}))
    assert done.returncode == 0, done.stderr
    assert "nvidia-smi -lgc" in done.stdout and "nvidia-smi -rgc" in done.stdout


def test_a_side_can_be_a_git_revision(tmp_path: Path) -> None:
    project = tmp_path / "repo" / "sub"
    project.mkdir(parents=True)
    (project / "fdl.yml").write_text(
        textwrap.dedent(
            f"""\
            bench:
              epoch:
                run: [{sys.executable}, v.py]
                compare:
                  old: {{revision: HEAD~1}}
                  new: {{}}
                rounds: 2
                warmup: 0
                figures: {{ms: 'ms/epoch: ([0-9.]+)'}}
            """
        )
    )
    (project / "v.py").write_text('print("ms/epoch: 100")\n')
    (tmp_path / "repo" / ".gitignore").write_text("*.jsonl\n")
    _git(tmp_path / "repo")
    (project / "v.py").write_text('print("ms/epoch: 200")\n')
    _git(tmp_path / "repo")
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    records = _records(project / "out.jsonl")
    figures = {(r["side"], r["figures"]["ms"]) for r in records[1:]}  # type: ignore[index]
    assert figures == {("old", 100.0), ("new", 200.0)}
    old = subprocess.run(
        ["git", "rev-parse", "HEAD~1"], cwd=project, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert records[0]["revisions"] == {"HEAD~1": old}
    # The worktree made for the run is gone.
    trees = subprocess.run(
        ["git", "worktree", "list"], cwd=project, capture_output=True, text=True, check=True
    ).stdout
    assert len(trees.splitlines()) == 1


def test_the_environment_describes_the_sides_libtorch_variants(tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        TWO_SIDES.replace(
            '{args: [slow, "120"]}', '{args: [slow, "120"], libtorch: builds/x}'
        ).replace("rounds: 10", "rounds: 1"),
    )
    variant = project / "libtorch" / "builds" / "x"
    (variant / "lib").mkdir(parents=True)
    (variant / "variant.json").write_text(
        json.dumps({"torch": "2.9.1", "cuda": "12.8", "archs_found": {"cubin": ["sm_61"]}})
    )
    (project / "libtorch" / ".active").write_text("builds/x\n")
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    header = _records(project / "out.jsonl")[0]
    libtorch = header["environment"]["libtorch"]  # type: ignore[index]
    assert libtorch["active"] == "builds/x"
    assert libtorch["variants"]["builds/x"] == {
        "torch": "2.9.1",
        "cuda": "12.8",
        "archs": ["sm_61"],
        "source": None,
    }
    sides = header["benchmarks"][0]["sides"]  # type: ignore[index]
    assert sides[1]["libtorch"] == "builds/x"
    # The side's program saw the variant's exports (it prints them as a JSON line).
    shown = json.loads((project / "seen.json").read_text())
    assert shown["LIBTORCH"] == str(variant)
    assert shown["LD_LIBRARY_PATH"].startswith(f"{variant}/lib")
    (project / "libtorch" / "builds" / "x" / "lib").rmdir()
    missing = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert missing.returncode == 4 and "builds/x" in missing.stderr


def test_warmup_seconds_warms_up_interleaved_and_records_nothing(tmp_path: Path) -> None:
    bench = TWO_SIDES.replace("warmup: 1", "warmup: 0\n    warmup_seconds: 0.001")
    project = _project(tmp_path, bench.replace("rounds: 10", "rounds: 2"))
    done = _fdl(project, "bench", "run", "-o", "out.jsonl")
    assert done.returncode == 0, done.stderr
    assert "warm-up fast" in done.stderr and "warm-up slow" in done.stderr
    rounds = [r for r in _records(project / "out.jsonl") if r["type"] == "round"]
    calls = int((project / "count-fast").read_text())
    assert len([r for r in rounds if r["side"] == "fast"]) == 2 and calls >= 3


def test_report_plots_a_png_per_benchmark(tmp_path: Path) -> None:
    project = _project(tmp_path, TWO_SIDES.replace("rounds: 10", "rounds: 4"))
    assert _fdl(project, "bench", "run", "-o", "out.jsonl").returncode == 0
    made = _fdl(project, "bench", "report", "out.jsonl", "--plot", "plots", "--json")
    assert made.returncode == 0, made.stderr
    [png] = json.loads(made.stdout)["plots"]
    data = Path(png).read_bytes()
    assert Path(png) == project / "plots" / "epoch.png"
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # without matplotlib: exit 4 with the fix (a blocked import stands in for a machine
    # without the plot extra)
    blocker = tmp_path / "blocked"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked')\n")
    env = _env({"PYTHONPATH": str(blocker)})
    missing = _fdl(project, "bench", "report", "out.jsonl", "--plot", "p2", env=env)
    assert missing.returncode == 4, missing.stderr
    assert "matplotlib" in missing.stderr and "fdl[plot]" in missing.stderr
