"""Running benchmark rounds; every round is appended to a JSON Lines file as it ends.

The first line of a run describes the environment once (CPU and governor, GPUs with
driver and clocks, the active libtorch variant, the git commit and whether the tree is
dirty, fdl's version); then one line per round: benchmark, side, round, warm-up or not,
wall time, the figure read from the output, exit status. A run that is interrupted keeps
the rounds it finished, and ``fdl bench report`` works on them.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fdl import __version__
from fdl.bench._plan import Benchmark, Metric, Step, interleave
from fdl.errors import CommandFailed, FdlError
from fdl.runner import Runner, default_runner

__all__ = ["RoundResult", "capture_environment", "read_figure", "run_benchmarks"]


@dataclass(frozen=True)
class RoundResult:
    """One finished round, as written to the results file."""

    step: Step
    wall_ms: float
    value: float | None
    exit_code: int

    def to_json(self, run_id: str) -> dict[str, Any]:
        return {
            "kind": "round",
            "run": run_id,
            "bench": self.step.benchmark.name,
            "side": self.step.side.name,
            "side_index": self.step.benchmark.sides.index(self.step.side),
            "round": self.step.round,
            "warmup": self.step.warmup,
            "wall_ms": round(self.wall_ms, 3),
            "value": self.value,
            "unit": self.step.benchmark.metric.unit,
            "better": self.step.benchmark.metric.better,
            "exit_code": self.exit_code,
            "threshold": {"percent": self.step.benchmark.percent, "mads": self.step.benchmark.mads},
        }


def read_figure(metric: Metric, output: str, wall_ms: float) -> float | None:
    """The round's figure: the metric read from the output (the last match), or the wall
    time when the benchmark reads none; None when the output does not have it."""
    if metric.wall_time:
        return wall_ms
    if metric.regex is not None:
        found = re.findall(metric.regex, output, re.M)
        if not found:
            return None
        last = found[-1]
        text = last[0] if isinstance(last, tuple) else last
        try:
            return float(text)
        except ValueError:
            return None
    for raw in reversed(output.splitlines()):
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get(metric.json_key), (int, float)):
            return float(data[str(metric.json_key)])
    return None


def _git(directory: Path, runner: Runner, *args: str) -> str | None:
    try:
        done = runner.run(["git", "-C", str(directory), *args], check=False, timeout=10)
    except FdlError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu() -> dict[str, Any]:
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    governor = None
    with contextlib.suppress(OSError):
        governor = (
            Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .read_text(encoding="utf-8")
            .strip()
        )
    return {"model": model, "cores": os.cpu_count(), "governor": governor}


def _gpus(runner: Runner) -> list[dict[str, Any]]:
    if runner.which("nvidia-smi") is None:
        return []
    query = "index,name,driver_version,clocks.sm,clocks.max.sm,clocks.mem"
    try:
        done = runner.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            check=False,
            timeout=30,
        )
    except FdlError:
        return []
    gpus = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 6:
            keys = ("index", "name", "driver", "sm_clock_mhz", "max_sm_clock_mhz", "mem_clock_mhz")
            gpus.append(dict(zip(keys, parts, strict=True)))
    return gpus


def capture_environment(
    directory: Path, runner: Runner, environ: Mapping[str, str]
) -> dict[str, Any]:
    """What the results depend on, captured once per run."""
    from fdl.libtorch import variants
    from fdl.paths import Context

    libtorch: dict[str, Any] | None = None
    try:
        context = Context(directory, project=True)
        active = variants.active_name(context)
        if active is not None:
            info = variants.read_info(context.libtorch_dir / active, active)
            libtorch = {
                "variant": active,
                "torch": info.torch,
                "cuda": info.cuda,
                "archs": info.archs_found.get("cubin", []),
            }
    except FdlError:
        libtorch = None
    commit = _git(directory, runner, "rev-parse", "HEAD")
    status = _git(directory, runner, "status", "--porcelain") if commit else None
    return {
        "kind": "environment",
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": _cpu(),
        "gpus": _gpus(runner),
        "libtorch": libtorch,
        "git": {"commit": commit, "dirty": bool(status)} if commit else None,
        "fdl": __version__,
        "python": platform.python_version(),
        "image": environ.get("FDL_IMAGE_DIGEST"),
    }


def _run_round(step: Step, environ: Mapping[str, str], runner: Runner) -> tuple[float, str, int]:
    """Wall time (ms), output and exit status of one round (timed around the process)."""
    env = {**environ, **step.side.env}
    started = time.perf_counter_ns()
    try:
        done = runner.run(
            ["sh", "-c", step.side.run],
            cwd=step.benchmark.directory,
            env=env,
            check=False,
            timeout=step.benchmark.timeout,
        )
        code, output = done.returncode, done.stdout + done.stderr
    except CommandFailed as failed:  # it did not finish in time (Ctrl-C goes through)
        code, output = 124, failed.message
    wall_ms = (time.perf_counter_ns() - started) / 1e6
    return wall_ms, output, code


def run_benchmarks(
    selected: list[Benchmark],
    results: Path,
    *,
    directory: Path,
    environ: Mapping[str, str] | None = None,
    runner: Runner | None = None,
    on_round: Callable[[RoundResult, int, int], None] | None = None,
) -> list[RoundResult]:
    """Run every round of ``selected`` (interleaved), appending each to ``results``.

    Raises:
        FdlError: a round failed (non-zero exit, or its figure missing from the output);
            the rounds before it are in the file.
    """
    env = dict(os.environ if environ is None else environ)
    run = runner or default_runner()
    run_id = uuid.uuid4().hex[:12]
    results.parent.mkdir(parents=True, exist_ok=True)
    done: list[RoundResult] = []
    with results.open("a", encoding="utf-8") as out:
        out.write(json.dumps({**capture_environment(directory, run, env), "run": run_id}) + "\n")
        out.flush()
        for benchmark in selected:
            steps = interleave(benchmark)
            for index, step in enumerate(steps, 1):
                wall_ms, output, code = _run_round(step, env, run)
                value = read_figure(benchmark.metric, output, wall_ms) if code == 0 else None
                result = RoundResult(step, wall_ms, value, code)
                out.write(json.dumps(result.to_json(run_id)) + "\n")
                out.flush()
                done.append(result)
                if on_round is not None:
                    on_round(result, index, len(steps))
                if code != 0 or value is None:
                    tail = " ".join(output.strip().splitlines()[-3:])[:300]
                    what = (
                        f"exited with status {code}"
                        if code != 0
                        else "printed no figure for its metric"
                    )
                    raise FdlError(
                        f"bench {benchmark.name}, side {step.side.name}, round {step.round}: "
                        f"`{step.side.run}` {what}" + (f" ({tail})" if tail else ""),
                        hint=f"the finished rounds are in {results}; fix the command or its "
                        "`metric:`",
                    )
    return done
