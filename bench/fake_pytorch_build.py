"""Time builds of the fake PyTorch tree (tests/fixtures/fake-pytorch) and print a table.

Each configuration is built from a fresh copy: first `--cmake-only` (configure), then
the build proper, then a re-run with nothing left to do. Wall time depends on what else
runs on the machine; CPU time (user+sys of all child processes) does not, and CPU time
divided by MAX_JOBS approximates the wall time on an otherwise idle machine. Usage:

    python bench/fake_pytorch_build.py                 # CPU + CUDA with 1/2/4 archs
    python bench/fake_pytorch_build.py --units 8 --no-cuda
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAKE_PYTORCH = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "fake-pytorch"
_BUILD_ENV = re.compile(r"^(BUILD_|USE_|CMAKE_|TORCH_|FAKE_TORCH_|PYTORCH_)|^(MAX_JOBS|DEBUG)$")

CUDA_CASES = [
    ("1 arch", "12.0"),
    ("2 archs", "7.5;12.0+PTX"),
    ("4 archs", "7.5;8.6;9.0;12.0+PTX"),
]
COLUMNS = ["configure", "build", "cfg CPU", "build CPU", "re-run", "libtorch_cuda"]


def timed(src: Path, env: dict[str, str], *args: str) -> tuple[float, float]:
    """Wall and CPU seconds of one run of the build script."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "tools/build_libtorch.py", *args],
        cwd=src,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"build failed:\n{proc.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(overrides: dict[str, str]) -> list[str]:
    """Configure, build and re-run one configuration in a fresh copy; the table cells."""
    env = {k: v for k, v in os.environ.items() if not _BUILD_ENV.search(k)}
    env.update(overrides)
    with tempfile.TemporaryDirectory(prefix="fake-pytorch-bench-") as tmp:
        src = Path(tmp) / "pytorch"
        shutil.copytree(FAKE_PYTORCH, src)
        configure, configure_cpu = timed(src, env, "--cmake-only")
        build, build_cpu = timed(src, env)
        noop, _ = timed(src, env)
        cuda_lib = src / "torch" / "lib" / "libtorch_cuda.so"
        size = f"{cuda_lib.stat().st_size / 1e6:.1f} MB" if cuda_lib.exists() else "-"
    return [
        f"{configure:.1f}s",
        f"{build:.1f}s",
        f"{configure_cpu:.1f}s",
        f"{build_cpu:.1f}s",
        f"{noop:.1f}s",
        size,
    ]


def cases(units: str, jobs: str, cuda: bool) -> list[tuple[str, dict[str, str]]]:
    base = {"FAKE_TORCH_UNITS": units, "MAX_JOBS": jobs, "BUILD_TEST": "0"}
    out = [("CPU", {**base, "USE_CUDA": "0"})]
    if cuda:
        for flash in ("0", "1"):
            for label, archs in CUDA_CASES:
                overrides = {
                    **base,
                    "USE_CUDA": "1",
                    "TORCH_CUDA_ARCH_LIST": archs,
                    "USE_FLASH_ATTENTION": flash,
                }
                out.append((f"CUDA {label} ({archs}), flash={flash}", overrides))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="24", help="FAKE_TORCH_UNITS (default 24)")
    parser.add_argument("--jobs", default=str(os.cpu_count()), help="MAX_JOBS (default: all cores)")
    parser.add_argument("--no-cuda", action="store_true", help="only the CPU build")
    options = parser.parse_args()
    cuda = not options.no_cuda and shutil.which("nvcc") is not None

    print(
        f"fake-pytorch builds: FAKE_TORCH_UNITS={options.units}, MAX_JOBS={options.jobs}, "
        f"{os.cpu_count()} cores"
    )
    print(f"{'configuration':<46}" + "".join(f"{c:>14}" for c in COLUMNS))
    print("-" * (46 + 14 * len(COLUMNS)))
    for name, overrides in cases(options.units, options.jobs, cuda):
        cells = measure(overrides)
        print(f"{name:<46}" + "".join(f"{c:>14}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
