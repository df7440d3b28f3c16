"""How long fdl.binaries takes to list the GPU code and dependencies of real libraries.

Usage: python bench/fatbin_scan.py [library.so ...]
Without arguments it extracts libtorch_cuda.so / libtorch_cpu.so from the torch 2.14.1 cu130
wheel (from PyPI, once, into the tests' artefact cache: tests/support/artefacts.py) and scans
them. Prints a table; asserts nothing.
"""

from __future__ import annotations

import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fdl.binaries import read_device_code, read_dynamic  # noqa: E402
from tests.support.artefacts import download_wheel  # noqa: E402

MEMBERS = ("torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cpu.so", "torch/lib/libc10_cuda.so")
RUNS = 5


def _best(action: Callable[[Path], object], path: Path) -> float:
    best = float("inf")
    for _ in range(RUNS):
        start = time.perf_counter()
        action(path)
        best = min(best, time.perf_counter() - start)
    return best


def main(paths: list[Path]) -> None:
    print(
        f"{'library':<24} {'MB':>6} {'containers':>10} {'entries':>8} {'fatbin ms':>10} {'dynamic ms':>10}  code"
    )
    for path in paths:
        code = read_device_code(path)
        fatbin = _best(read_device_code, path) * 1000
        dynamic = _best(read_dynamic, path) * 1000
        size = path.stat().st_size / 1e6
        print(
            f"{path.name:<24} {size:>6.0f} {code.containers:>10} {len(code.entries):>8} "
            f"{fatbin:>10.1f} {dynamic:>10.2f}  {code.summary()}"
        )


if __name__ == "__main__":
    given = [Path(p) for p in sys.argv[1:]]
    if given:
        main(given)
    else:
        try:
            wheel_path = download_wheel("torch==2.14.1")
        except OSError as exc:
            sys.exit(f"give library paths (the torch 2.14.1 wheel could not be had: {exc})")
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel_path) as wheel:
            for member in MEMBERS:
                wheel.extract(member, tmp)
            main([Path(tmp) / m for m in MEMBERS])
