"""What this machine has: GPUs, build tools, resources.

Programs run through :class:`fdl.runner.Runner` (tests pass ``tests.support.fakes.FakeRunner``). Every
probe returns a value or the reason it could not tell; none raises for a missing tool.
"""

from __future__ import annotations

from fdl.system.gpus import Gpu, GpuReport, detect_gpus, parse_gpu_csv
from fdl.system.probe import Probe
from fdl.system.resources import Cpu, Memory, cpu, disk_free, memory
from fdl.system.toolchain import (
    DockerInfo,
    NvccInfo,
    Toolchain,
    ToolVersion,
    find_cuda_home,
    is_cuda_home,
    probe_docker,
    probe_nvcc,
    probe_tool,
    probe_toolchain,
    rust_toolchain_file_problem,
)

__all__ = [
    "Cpu",
    "DockerInfo",
    "Gpu",
    "GpuReport",
    "Memory",
    "NvccInfo",
    "Probe",
    "ToolVersion",
    "Toolchain",
    "cpu",
    "detect_gpus",
    "disk_free",
    "find_cuda_home",
    "is_cuda_home",
    "memory",
    "parse_gpu_csv",
    "probe_docker",
    "probe_nvcc",
    "probe_tool",
    "probe_toolchain",
    "rust_toolchain_file_problem",
]
