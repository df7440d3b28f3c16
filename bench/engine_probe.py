"""How long fdl.engine takes to import and to choose a docker client / compose.

Run: python bench/engine_probe.py [rounds]   (needs docker; prints a table)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def timed(action: Callable[[], object], rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def import_engine() -> None:
    code = (
        "import time; t=time.perf_counter(); import fdl.engine; print((time.perf_counter()-t)*1000)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=REPO)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    from fdl.engine import DockerEngine, select_client
    from fdl.runner import SubprocessRunner

    runner = SubprocessRunner()
    selection = select_client(runner)
    rows = [
        ("python -c 'import fdl.engine' (process)", timed(import_engine, rounds)),
        (
            f"select_client ({len(selection.tried)} clients)",
            timed(lambda: select_client(runner), rounds),
        ),
        (
            "DockerEngine().compose() (incl. selection)",
            timed(lambda: DockerEngine(runner).compose(), rounds),
        ),
    ]
    print(f"{'operation':<48} {'median ms':>10} {'min ms':>8}")
    for name, (median, low) in rows:
        print(f"{name:<48} {median:>10.1f} {low:>8.1f}")
    print()
    print("\n".join(selection.explain()))


if __name__ == "__main__":
    main()
