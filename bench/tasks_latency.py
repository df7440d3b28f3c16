"""Latency of `fdl <command>` against running the script directly (prints a table).

    python bench/tasks_latency.py [--runs N]

Every row is the best of N runs of a fresh process (interpreter start included).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROJECT = {
    "fdl.yml": """\
        commands:
          greet: {run: echo hello}
          dtest: {run: cargo test, docker: dev}
          train:
        """,
    "docker-compose.yml": "services:\n  dev:\n    image: x\n    volumes: ['.:/workspace']\n",
    "train/fdl.yml": """\
        entry: echo train
        schema:
          options:
            model: {type: string, choices: [mlp, lenet]}
        training: {epochs: 5}
        commands:
          quick: {options: {model: lenet}, training: {epochs: 1}}
        """,
}


def best(argv: list[str], cwd: Path, env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FDL_IN_CONTAINER": "0",
        "FDL_COMPOSE": "docker-compose",
    }
    fdl = [sys.executable, "-m", "fdl"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in PROJECT.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(textwrap.dedent(text))
        rows = [
            ("sh -c 'echo hello' (baseline)", ["sh", "-c", "echo hello"]),
            ("python -c pass (interpreter)", [sys.executable, "-c", "pass"]),
            ("fdl greet", [*fdl, "greet"]),
            ("fdl greet --dry-run", [*fdl, "greet", "--dry-run"]),
            ("fdl dtest --dry-run (docker plan)", [*fdl, "dtest", "--dry-run"]),
            ("fdl train quick --dry-run (nested preset)", [*fdl, "train", "quick", "--dry-run"]),
            (
                "fdl __complete bash -- train '' (TAB)",
                [*fdl, "__complete", "bash", "--", "train", ""],
            ),
            ("fdl --help", [*fdl, "--help"]),
        ]
        width = max(len(label) for label, _ in rows)
        print(f"{'command':<{width}}  best of {runs} (ms)")
        for label, argv in rows:
            print(f"{label:<{width}}  {best(argv, root, env, runs):8.1f}")


if __name__ == "__main__":
    main()
