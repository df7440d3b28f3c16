"""What a libtorch source build costs per GPU arch: -gencode targets and nvcc time.

Part 1 (pure): for the official arch lists of recent PyTorch CUDA builds and for the user's
two GPUs (sm_61 + sm_120), how many -gencode targets each compile of a .cu file emits (every
CUDA source of libtorch is compiled once per target).

Part 2 (measured, needs nvcc): wall time of compiling the fake PyTorch tree's CUDA sources
(tests/fixtures/fake-pytorch: BinaryOps, Reduce, SGD, flash_fwd) with 1, 2 and 4 archs the
local nvcc accepts, with the fatbin compression flags a plan uses.

Part 3 (measured, needs nvcc and GNU time): CPU seconds and peak RSS per translation unit of
the fake tree, split into a host part and a part per -gencode target (the figures
fdl/data/compat/build_estimate.yaml `fake_tree` holds, so a drift shows here).

Part 4 (pure): the estimate `fdl libtorch build` prints, for three machine shapes x two
arch lists (fdl's 6.1;12.0 and the official cu130 list of torch 2.10.0) x flash attention on
and off, with MAX_JOBS chosen as the planner chooses it.

    python bench/build_plan.py [--runs 2] [--estimates-only]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from fdl.compat import (
    fatbin_compression_flags,
    max_parallel_jobs,
    parse_archs,
    variant_targets,
)
from fdl.libtorch.build import estimate_build, estimate_table

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


CXX_SOURCES = [
    TREE / "c10" / "core" / "Device.cpp",
    TREE / "torch" / "csrc" / "api" / "src" / "ops.cpp",
]
SHAPES = [
    ("8 cores / 32 GB", 8, 32.0),
    ("32 cores / 128 GB", 32, 128.0),
    ("2 cores / 24 GB", 2, 24.0),
]


def _timed(argv: list[str]) -> tuple[float, float]:
    """CPU seconds (user+sys) and peak RSS in GB of one compile, by GNU time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S %M", "-o", out.name, *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{argv[0]} failed: {done.stderr[-600:]}")
        user, system, rss_kb = out.read().split()[-3:]
    return float(user) + float(system), int(rss_kb) / 1024 / 1024


def _nvcc_argv(nvcc: str, source: Path, spec: str, obj: str) -> list[str]:
    archs = parse_archs(spec)
    return [
        nvcc,
        "-c",
        str(source),
        *archs.gencode_flags(),
        *fatbin_compression_flags("13.0"),
        "-O3",
        "-std=c++17",
        "-I",
        str(CUDA_DIR / "cuda"),
        "-I",
        str(TREE),
        "-I",
        str(TREE / "aten" / "src"),
        "-o",
        obj,
    ]


def per_unit_costs(nvcc: str, runs: int) -> dict[str, tuple[float, float, float]]:
    """Per kind: (host s, s per target, peak GB), from 1 and 4 targets (least squares)."""
    specs = {1: "12.0", 4: "7.5;8.6;9.0;12.0"}
    kinds = {"cuda": SOURCES[:3], "flash": SOURCES[3:]}
    result: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for kind, sources in kinds.items():
            mean: dict[int, float] = {}
            peak = 0.0
            for count, spec in specs.items():
                samples = []
                for source in sources:
                    for _ in range(runs):
                        cpu, rss = _timed(_nvcc_argv(nvcc, source, spec, f"{scratch}/x.o"))
                        samples.append(cpu)
                        peak = max(peak, rss)
                mean[count] = statistics.median(samples)
            per_target = (mean[4] - mean[1]) / 3
            result[kind] = (mean[1] - per_target, per_target, peak)
        cxx = shutil.which("g++") or "c++"
        samples, peak = [], 0.0
        for source in CXX_SOURCES:
            for _ in range(runs):
                argv = [cxx, "-O3", "-std=c++20", "-c", str(source), "-I", str(TREE)]
                argv += ["-I", str(TREE / "aten" / "src"), "-I", str(TREE / "c10")]
                argv += ["-I", str(TREE / "torch" / "csrc" / "api" / "include")]
                cpu, rss = _timed([*argv, "-o", f"{scratch}/y.o"])
                samples.append(cpu)
                peak = max(peak, rss)
        result["cxx"] = (statistics.median(samples), 0.0, peak)
    return result


def print_costs(nvcc: str, runs: int) -> None:
    table = estimate_table()["fake_tree"]
    print("\nCPU seconds per TU of the fake tree (host part + per -gencode target), GNU time:\n")
    print(
        "| kind | host s | s per target | peak RSS GB | build_estimate.yaml (host / per target) |"
    )
    print("|---|---|---|---|---|")
    for kind, (host, per_target, peak) in per_unit_costs(nvcc, runs).items():
        held = table[kind]
        print(
            f"| {kind} | {host:.2f} | {per_target:.2f} | {peak:.2f} | "
            f"{held['host']} / {held.get('per_target', '-')} |"
        )


def print_estimates() -> None:
    official = variant_targets("2.10.0", "cu130")
    lists = [
        ("6.1;12.0", parse_archs("6.1;12.0")),
        (f"cu130 {official.torch_cuda_arch_list()}", official),
    ]
    print("\nEstimated libtorch 2.10.0 build (fdl libtorch build's estimate line):\n")
    print("| machine | archs | targets | flash | MAX_JOBS | wall | peak RAM | note |")
    print("|---|---|---|---|---|---|---|---|")
    for name, cores, ram in SHAPES:
        for label, archs in lists:
            for flash in (True, False):
                jobs = max_parallel_jobs(max(ram - 2.0, 0.0), cores, flash_attention=flash)
                est = estimate_build(
                    torch="2.10.0",
                    archs=archs,
                    jobs=jobs,
                    cores=cores,
                    ram_gb=ram,
                    flash_attention=flash,
                )
                note = f"over RAM: MAX_JOBS={est.fits_jobs}" if est.over_memory else ""
                print(
                    f"| {name} | `{label}` | {est.targets} | {'on' if flash else 'off'} | {jobs} | "
                    f"{est.duration()} | ~{est.peak_gb:.0f} GB | {note} |"
                )
    over = estimate_build(torch="2.10.0", archs=official, jobs=8, cores=8, ram_gb=32.0)
    print(f"\nMAX_JOBS=8 on 8 cores / 32 GB, cu130 list: {over.summary()}")
    print(
        f"\nbasis ({'6.1;12.0'}, 8 cores): {estimate_build(torch='2.10.0', archs='6.1;12.0', jobs=6, cores=8, ram_gb=32.0).basis}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--estimates-only", action="store_true")
    args = parser.parse_args()
    if args.estimates_only:
        print_estimates()
        return
    print("| arch list | TORCH_CUDA_ARCH_LIST | -gencode targets |")
    print("|---|---|---|")
    for name, text, count in targets_table():
        print(f"| {name} | `{text}` | {count} |")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("\n(no nvcc on PATH: compile times not measured)")
        print_estimates()
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
    print_costs(nvcc, args.runs)
    print_estimates()


if __name__ == "__main__":
    main()
