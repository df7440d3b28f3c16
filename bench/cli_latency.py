"""Start-up latency of the CLI against the bare interpreter.

Median wall time of `fdl --version`, `fdl --help` and `fdl config show` (on
the 3-layer example: base + inherited file + overlay) compared with
`python -c pass` on the same interpreter. Target: `config show` within 4x.

    python bench/cli_latency.py [--runs 30] [--fdl PATH-TO-fdl-SCRIPT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median_ms, print_table, wall_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--fdl", help="the fdl console script (default: python -m fdl with this checkout)"
    )
    args = parser.parse_args()

    env = dict(os.environ, NO_COLOR="1")
    # Measure what users get: byte-code caches written (pip compiles on install).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "fdl")], check=False)
    script = Path(args.fdl) if args.fdl else Path(sys.executable).parent / "fdl"
    if script.exists():
        fdl = [str(script)]
    else:
        env["PYTHONPATH"] = str(REPO)
        fdl = [sys.executable, "-m", "fdl"]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(REPO / "tests" / "fixtures" / "manifest-project", project)
        baseline = median_ms(wall_times([sys.executable, "-c", "pass"], runs=args.runs, env=env))
        rows = [("python -c pass", f"{baseline:.1f}", "1.00x")]
        for label, extra in [
            ("fdl --version", ["--version"]),
            ("fdl --help", ["--help"]),
            ("fdl config show (3 layers)", ["--env", "ci", "config", "show"]),
            ("fdl config show --json", ["--env", "ci", "config", "show", "--json"]),
            ("fdl config explain", ["--env", "ci", "config", "explain"]),
        ]:
            ms = median_ms(wall_times([*fdl, *extra], runs=args.runs, cwd=project, env=env))
            rows.append((label, f"{ms:.1f}", f"{ms / baseline:.2f}x"))
    print(f"median of {args.runs} runs, interpreter {sys.executable}, fdl = {' '.join(fdl)}")
    print_table(["command", "median ms", "vs python"], rows)


if __name__ == "__main__":
    main()
