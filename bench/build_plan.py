"""What a libtorch source build costs per GPU arch: -gencode targets and nvcc time.

Part 1 (pure): for the official arch lists of recent PyTorch CUDA builds and for the user's
two GPUs (sm_61 + sm_120), how many -gencode targets each compile of a .cu file emits (every
CUDA source of libtorch is compiled once per target).

Part 2 (measured, needs nvcc): wall time of compiling the fake PyTorch tree's CUDA sources
(tests/fixtures/fake-pytorch: BinaryOps, Reduce, SGD, flash_fwd) with 1, 2 and 4 archs the
local nvcc accepts, with the fatbin compression flags a plan uses.

    python bench/build_plan.py [--runs 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from fdl.compat import fatbin_compression_flags, parse_archs, variant_targets

REPO = Path(__file__).resolve().parent.parent
TREE = REPO / "tests" / "fixtures" / "fake-pytorch"
CUDA_DIR = REPO / "tests" / "fixtures" / "fake-pytorch" / "aten" / "src" / "ATen" / "native"
SOURCES = [
    CUDA_DIR / "cuda" / "BinaryOps.cu",
    CUDA_DIR / "cuda" / "Reduce.cu",
    CUDA_DIR / "cuda" / "SGD.cu",
    CUDA_DIR / "transformers" / "cuda" / "flash_attn" / "flash_fwd.cu",
]
OFFICIAL = [("2.14.1", "cu126"), ("2.14.1", "cu130"), ("2.10.0", "cu128")]
MEASURED = ["12.0", "7.5;12.0", "7.5;8.6;9.0;12.0"]


def targets_table() -> list[tuple[str, str, int]]:
    rows = []
    for torch, variant in OFFICIAL:
        archs = variant_targets(torch, variant)
        rows.append((f"official {torch} {variant}", archs.torch_cuda_arch_list(), len(archs)))
    for spec in ("6.1;12.0", "6.1;12.0+PTX"):
        archs = parse_archs(spec)
        rows.append(("sm_61 + sm_120 (fdl)", archs.torch_cuda_arch_list(), len(archs)))
    return rows


def compile_seconds(spec: str, nvcc: str, runs: int) -> float:
    archs = parse_archs(spec)
    flags = [*archs.gencode_flags(), *fatbin_compression_flags("13.0"), "-O3", "-std=c++17"]
    times = []
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(runs):
            start = time.perf_counter()
            for index, source in enumerate(SOURCES):
                argv = [
                    nvcc,
                    "-c",
                    str(source),
                    "-I",
                    str(source.parent),
                    *flags,
                    "-I",
                    str(CUDA_DIR / "cuda"),
                    "-I",
                    str(TREE),
                    "-I",
                    str(TREE / "aten" / "src"),
                    "-o",
                    f"{scratch}/{index}.o",
                ]
                done = subprocess.run(argv, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"nvcc failed for {source.name}: {done.stderr[-600:]}")
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print("| arch list | TORCH_CUDA_ARCH_LIST | -gencode targets |")
    print("|---|---|---|")
    for name, text, count in targets_table():
        print(f"| {name} | `{text}` | {count} |")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("\n(no nvcc on PATH: compile times not measured)")
        return
    print(
        f"\nnvcc compile of {len(SOURCES)} CUDA sources of the fake tree (median of {args.runs}):\n"
    )
    print("| archs | -gencode targets | seconds | seconds per target |")
    print("|---|---|---|---|")
    for spec in MEASURED:
        count = len(parse_archs(spec))
        seconds = compile_seconds(spec, nvcc, args.runs)
        print(f"| `{spec}` | {count} | {seconds:.1f} | {seconds / count:.1f} |")


if __name__ == "__main__":
    main()
