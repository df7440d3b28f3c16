"""fdl bench beside hyperfine on one workload, in one run.

Two CPU-bound sides whose true ratio is known (b does ``--factor`` times a's work):
each block runs `fdl bench run` (rounds interleaved a b, b a, ...) and `hyperfine`
(all runs of a, then all of b) on the same commands, the two tools' order alternating
from block to block, optionally under ``--load`` busy processes. It prints, per block
and tool, the ratio b/a each tool reports and its spread: fdl's ratio of medians (wall),
its paired ratio (wall) and its CPU-time ratio with their 95% intervals, and each
side's scaled MAD; hyperfine's ratio of medians and of means with each side's standard
deviation. hyperfine is installed from Debian when missing (apt-get, as root).

    python bench/hyperfine_compare.py [--blocks 3] [--rounds 10] [--factor 1.2] [--load 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_table


def ensure_hyperfine() -> str:
    found = shutil.which("hyperfine")
    if found:
        return found
    if os.geteuid() != 0:
        raise SystemExit("hyperfine is missing: apt-get install hyperfine (as root)")
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "hyperfine"]):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    found = shutil.which("hyperfine")
    if not found:
        raise SystemExit("apt-get install hyperfine did not put hyperfine on PATH")
    return found


def workload(n: int) -> list[str]:
    return [sys.executable, "-c", f"sum(i * i for i in range({n}))"]


def run_fdl(project: Path, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "fdl", "bench", "run", "-o", "out.jsonl", "-n", str(rounds),
         "--json"],
        cwd=project, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"fdl bench run failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)["benchmarks"][0]
    rounds_file = [json.loads(line) for line in (project / "out.jsonl").read_text().splitlines()]
    run_id = rounds_file[-1]["run"]
    mine = [r for r in rounds_file if r.get("type") == "round" and r["run"] == run_id]
    result["cpu"] = {
        side: sorted(r["cpu_s"] for r in mine if r["side"] == side) for side in ("a", "b")
    }
    return result


def run_hyperfine(hyperfine: str, a: list[str], b: list[str], rounds: int, out: Path) -> Any:
    subprocess.run(
        [hyperfine, "-N", "--warmup", "1", "--runs", str(rounds), "--export-json", str(out),
         "--style", "none", "-n", "a", shlex.join(a), "-n", "b", shlex.join(b)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return json.loads(out.read_text())["results"]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--n", type=int, default=300_000, help="side a's loop length")
    parser.add_argument("--factor", type=float, default=1.2, help="side b's work / a's")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    args = parser.parse_args()
    hyperfine = ensure_hyperfine()
    a, b = workload(args.n), workload(int(args.n * args.factor))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    rows: list[list[object]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="fdl-vs-hyperfine-") as tmp:
            project = Path(tmp)
            (project / "fdl.yml").write_text(
                textwrap.dedent(
                    f"""\
                    bench:
                      w:
                        compare:
                          a: {{run: {json.dumps(a)}}}
                          b: {{run: {json.dumps(b)}}}
                        warmup: 1
                    """
                )
            )
            for block in range(args.blocks):
                tools = ["fdl", "hyperfine"] if block % 2 == 0 else ["hyperfine", "fdl"]
                for tool in tools:
                    if tool == "fdl":
                        r = run_fdl(project, args.rounds, env)
                        ratio, paired = r["ratios"]["b"], r["paired_ratios"]["b"]
                        sides = r["sides"]
                        cpu = median(r["cpu"]["b"]) / median(r["cpu"]["a"])
                        rows.append([
                            block + 1, "fdl bench",
                            f"{ratio['value']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}]",
                            f"{paired['value']:.3f} [{paired['low']:.3f}, {paired['high']:.3f}]",
                            f"{cpu:.3f}",
                            f"MAD a {100 * sides['a']['scaled_mad'] / sides['a']['median']:.1f}%"
                            f" b {100 * sides['b']['scaled_mad'] / sides['b']['median']:.1f}%",
                        ])  # fmt: skip
                    else:
                        res = run_hyperfine(hyperfine, a, b, args.rounds, project / "hf.json")
                        ha, hb = res
                        cpu = (hb["user"] + hb["system"]) / (ha["user"] + ha["system"])
                        rows.append([
                            block + 1, "hyperfine",
                            f"{hb['median'] / ha['median']:.3f}",
                            f"mean {hb['mean'] / ha['mean']:.3f}",
                            f"{cpu:.3f}",
                            f"sd a {100 * ha['stddev'] / ha['mean']:.1f}%"
                            f" b {100 * hb['stddev'] / hb['mean']:.1f}%",
                        ])  # fmt: skip
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    print(
        f"workload: python sum over {args.n} vs {int(args.n * args.factor)} items "
        f"(work ratio {args.factor}), {args.rounds} rounds/runs per side, load {args.load}, "
        f"{os.cpu_count()} CPUs"
    )
    print_table(
        ["block", "tool", "ratio b/a (median) [95% CI]", "paired ratio / mean ratio",
         "cpu ratio", "spread"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    main()
