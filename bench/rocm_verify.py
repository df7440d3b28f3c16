"""What reading a ROCm libtorch's GPU targets costs, beside reading a CUDA one's: the gfx
targets of ``libtorch_hip.so``'s offload bundles (compressed with zstd, as PyTorch's ROCm
builds ship them) against the cubins of a ``libtorch_cuda.so`` fatbin of the same size,
each in a fresh process (wall seconds, peak RSS, bytes read from the file); and the
start-up of ``fdl probe`` against ``fdl diagnose`` on the same machine.

Usage: python bench/rocm_verify.py [SIZE_MB]   (default 256; prints a table, asserts nothing)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import print_table  # noqa: E402
from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin, build_offload_bundle  # noqa: E402

GFX = ["gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1102",
       "gfx1150", "gfx1151", "gfx1200", "gfx1201"]  # fmt: skip
SM = [75, 80, 86, 90, 100, 120]
RUNS = 3

READ = """
import json, resource, sys, time
started = time.perf_counter()
from fdl.binaries import {function}
found = {function}(sys.argv[1])
seconds = time.perf_counter() - started
io = dict(l.split(": ") for l in open("/proc/self/io").read().splitlines())
print(json.dumps({{"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "read_mb": int(io["rchar"]) / 1e6, "found": {summary}, "units": {units}}}))
"""


def _hip_library(path: Path, size: int) -> None:
    triples = ["host-x86_64-unknown-linux-gnu-"] + [f"hipv4-amdgcn-amd-amdhsa--{g}" for g in GFX]
    one = build_offload_bundle(triples, code_size=64 << 10, compress="zstd", version=3)
    padded = one + bytes(-len(one) % 4096)
    # compressed bundles are small: fill the rest of the library with code as a real one does
    count = max(1, size // (2 * len(padded)))
    text = os.urandom(size - count * len(padded))
    path.write_bytes(build_elf({".text": text, ".hip_fatbin": padded * count}))


def _cuda_library(path: Path, size: int) -> None:
    entries = [FakeEntry("cubin", sm, payload=256 << 10) for sm in SM]
    one = build_fatbin([entries])
    count = max(1, size // (2 * len(one)))
    text = os.urandom(size - count * len(one))
    path.write_bytes(build_elf({".text": text, ".nv_fatbin": one * count}))


def _measure(function: str, summary: str, library: Path) -> dict[str, float]:
    units = "found.bundles" if function == "read_offload_code" else "found.containers"
    code = READ.format(function=function, summary=summary, units=units)
    runs = []
    for _ in range(RUNS):
        out = subprocess.run([sys.executable, "-c", code, str(library)], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        runs.append(json.loads(out))
    runs.sort(key=lambda r: r["seconds"])
    return runs[len(runs) // 2]


def _startup(args: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "fdl", *args], env=env, capture_output=True, check=False
        )
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def main() -> None:
    size = int(sys.argv[1]) << 20 if len(sys.argv) > 1 else 256 << 20
    with tempfile.TemporaryDirectory() as tmp:
        hip, cuda = Path(tmp, "libtorch_hip.so"), Path(tmp, "libtorch_cuda.so")
        _hip_library(hip, size)
        _cuda_library(cuda, size)
        rows = []
        for name, library, function, summary in (
            ("ROCm: offload bundles (zstd)", hip, "read_offload_code", "found.summary()"),
            ("CUDA: fatbin", cuda, "read_device_code", "found.summary()"),
        ):
            got = _measure(function, summary, library)
            rows.append([name, f"{library.stat().st_size / 1e6:.0f}", got["units"], f"{got['seconds']:.3f}",
                         f"{got['rss_mb']:.0f}", f"{got['read_mb']:.2f}", got["found"][:40]])  # fmt: skip
        print_table(
            ["library", "MB", "bundles", "seconds", "peak RSS MB", "read() MB", "found"], rows
        )
        env = {
            **os.environ,
            "FDL_HOME": tmp,
            "FLODL_TESTING_GPU_JSON": '[{"arch":"sm_61"},{"arch":"sm_120"}]',
        }
        probe = _startup(["probe", "--json", "--skip-mount"], env)
        diagnose = _startup(["diagnose", "--json", "--no-docker"], env)
        print()
        print_table(
            ["command", f"median of {RUNS} (s)"],
            [
                ["fdl probe --json --skip-mount", f"{probe:.3f}"],
                ["fdl diagnose --json --no-docker", f"{diagnose:.3f}"],
            ],
        )


if __name__ == "__main__":
    main()
