"""CI matrix planning and rendering time by matrix size, and the latency of the
commands CI and scripts/test.sh run (`fdl ci check`, `fdl ci matrix --json`) on this
repository's own manifest.

Target: the drift check stays well under a second, so running it on every test run
and in every workflow costs nothing noticeable.

    python bench/ci_matrix.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median_ms, print_table, wall_times

from fdl.ci import generated_files, plan_matrix
from fdl.manifest import load_manifest

FIXTURE = REPO / "tests" / "fixtures" / "cpp-train"
VARIANTS = ["cpu", "cu126", "cu130", "cu132", "build:pascal-blackwell", "build:blackwell"]


def manifest(profiles: int, variants: int) -> str:
    lines = ["libtorch:", '  torch: "2.13"', "images:"]
    for index in range(profiles):
        kind = "dev" if index % 2 == 0 else "train"
        lines += [f"  p{index}:", f"    kind: {kind}"]
        if kind == "train":
            lines.append("    program: build/train")
    lines += ["ci:", "  registry: ghcr.io/acme", f"  variants: [{', '.join(VARIANTS[:variants])}]"]
    return "\n".join(lines) + "\n"


def measure(profiles: int, variants: int) -> tuple[int, int, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "proj"
        shutil.copytree(FIXTURE, project)
        (project / "fdl.yml").write_text(manifest(profiles, variants), encoding="utf-8")
        loaded = load_manifest(project)
        start = time.perf_counter()
        matrix = plan_matrix(loaded, repo_root=project)
        planned = time.perf_counter()
        files = generated_files(matrix)
        rendered = time.perf_counter()
        return len(matrix.cells), len(files), planned - start, rendered - planned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for profiles, variants in ((2, 3), (4, 6), (10, 6)):
        cells, files, plan_s, render_s = measure(profiles, variants)
        rows.append(
            [
                f"{profiles} x {variants}",
                cells,
                files,
                f"{plan_s * 1000:.0f}",
                f"{render_s * 1000:.0f}",
            ]
        )
    print_table(["profiles x variants", "cells", "files", "plan ms", "render ms"], rows)
    print()
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    latency = []
    for command in (["ci", "check"], ["ci", "matrix", "--json"], ["config", "show"]):
        times = wall_times(
            [sys.executable, "-m", "fdl", *command], runs=args.runs, cwd=REPO, env=env
        )
        latency.append([f"fdl {' '.join(command)}", f"{median_ms(times):.0f}"])
    print_table(["command (this repository)", "median ms"], latency)


if __name__ == "__main__":
    main()
