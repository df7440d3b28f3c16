"""Knobs and resource figures for building libtorch from source.

Read from ``fdl/data/compat/build.yaml``: the switches that cut build time and size, memory per
parallel nvcc job, fatbin compression flags, and the cuDNN limit for old GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from fdl.compat._data import in_range, load_table, verified, version_key
from fdl.compat.archs import ArchList, parse_capability
from fdl.compat.cuda import toolkit

__all__ = [
    "BuildSwitch",
    "CudnnLimit",
    "SwitchCost",
    "build_switches",
    "cmake_policy_env",
    "cudnn_limit",
    "fatbin_compression_flags",
    "max_parallel_jobs",
    "memory_per_job_gb",
    "pip_cmake",
    "switch_costs",
    "torch_nvcc_flags",
]


@dataclass(frozen=True)
class BuildSwitch:
    """A PyTorch build switch (``USE_FLASH_ATTENTION``): what turning it off saves and costs.

    Attributes:
        serves: The (oldest, newest) arch whose GPUs use what the switch builds; None when
            every GPU does.
        off_costs: What a build without it lacks.
        needed_by: Framework (``flodl``) -> why that framework needs the switch on.
    """

    name: str
    effect: str
    saves: tuple[str, ...]
    drops_libraries: tuple[str, ...] = ()
    serves: tuple[str, str] | None = None
    off_costs: str = ""
    needed_by: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def served(self, archs: ArchList) -> list[str]:
        """The targets of ``archs`` (``sm_120``) that use what this switch builds."""
        if self.serves is None:
            return [t.code for t in archs]
        low, high = (parse_capability(v) for v in self.serves)
        return [t.code for t in archs if low <= t.capability <= high]


@dataclass(frozen=True)
class SwitchCost:
    """What one switch a build turns off costs for its GPUs and its project.

    Attributes:
        name: ``USE_DISTRIBUTED``.
        saves: What turning it off saves (``time``, ``size``, ...).
        costs: What the build's GPUs lose, or None when they lose nothing (a switch for
            other GPUs).
        needed: Why the project's framework needs it on, or None.
    """

    name: str
    saves: tuple[str, ...]
    costs: str | None
    needed: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "switch": self.name,
            "saves": list(self.saves),
            "costs": self.costs,
            "needed_by_project": self.needed,
        }


def switch_costs(
    switches: Mapping[str, str], archs: ArchList, framework: str | None = None
) -> list[SwitchCost]:
    """For each known switch that ``switches`` turns off (``0``/``OFF``): what it saves,
    what these GPUs lose, and whether ``framework`` (``flodl``) needs it."""
    known = {s.name: s for s in build_switches()}
    out: list[SwitchCost] = []
    for name, value in switches.items():
        switch = known.get(name)
        if switch is None or str(value).strip().upper() not in {"0", "OFF", "FALSE", "NO"}:
            continue
        served = switch.served(archs) if len(archs) else []
        costs = f"{', '.join(served)}: {switch.off_costs}" if served and switch.off_costs else None
        needed = switch.needed_by.get(framework) if framework else None
        out.append(SwitchCost(name, switch.saves, costs, needed))
    return out


@dataclass(frozen=True)
class CudnnLimit:
    """The newest cuDNN that still runs on the oldest GPU of a build."""

    max_cudnn: str
    reason: str
    verified: bool


def _table() -> Mapping[str, Any]:
    return load_table("build")


@cache
def build_switches() -> tuple[BuildSwitch, ...]:
    """The switches that cut build time or size, in table order."""
    return tuple(
        BuildSwitch(
            name=str(s["name"]),
            effect=str(s["effect"]),
            saves=tuple(s.get("saves", ())),
            drops_libraries=tuple(s.get("drops_libraries", ())),
            serves=(str(s["serves"]["min"]), str(s["serves"]["max"])) if "serves" in s else None,
            off_costs=" ".join(str(s.get("off_costs", "")).split()),
            needed_by={k: " ".join(str(v).split()) for k, v in s.get("needed_by", {}).items()},
            source=" ".join(str(s.get("source", "")).split()),
        )
        for s in _table()["switches"]
    )


def memory_per_job_gb(*, flash_attention: bool = True) -> float:
    """GB of RAM to budget per parallel nvcc job."""
    memory = _table()["memory"]
    key = "per_job_gb_flash_attention" if flash_attention else "per_job_gb"
    return float(memory[key])


def max_parallel_jobs(ram_gb: float, cores: int, *, flash_attention: bool = True) -> int:
    """A safe ``MAX_JOBS``: no more jobs than cores, nor than RAM allows (at least 1)."""
    by_memory = int(ram_gb // memory_per_job_gb(flash_attention=flash_attention))
    return max(1, min(cores, by_memory))


def fatbin_compression_flags(cuda: str) -> list[str]:
    """The nvcc flags official builds use to shrink fatbins with toolkit ``cuda``."""
    version = toolkit(cuda).version
    flags: list[str] = []
    for rule in _table()["fatbin_compression"]:
        if in_range(version, rule.get("since_cuda"), rule.get("until_cuda")):
            flags += [str(f) for f in rule["flags"]]
    return flags


def torch_nvcc_flags(cuda: str, extra: list[str]) -> list[str]:
    """TORCH_NVCC_FLAGS for toolkit ``cuda``: the official builds' compression flags and
    ``extra``, less what PyTorch's CMake adds itself (build.yaml
    ``pytorch_adds_nvcc_flags``: ``-Xfatbin -compress-all``, ``-Wno-deprecated-gpu-targets``)."""
    flags = fatbin_compression_flags(cuda) + extra
    for rule in _table()["pytorch_adds_nvcc_flags"]:
        added = [str(f) for f in rule["flags"]]
        for start in range(len(flags) - len(added), -1, -1):
            if flags[start : start + len(added)] == added:
                del flags[start : start + len(added)]
    return flags


def cudnn_limit(archs: ArchList) -> CudnnLimit | None:
    """The newest cuDNN usable with the oldest arch of ``archs``; None without a limit."""
    if not archs:
        return None
    oldest = min(archs.capabilities)
    limits = []
    for rule in _table()["cudnn_limits"]:
        if oldest < parse_capability(str(rule["below_arch"])):
            limits.append(CudnnLimit(str(rule["max_cudnn"]), str(rule["reason"]), verified(rule)))
    return min(limits, key=lambda lim: version_key(lim.max_cudnn)) if limits else None


def pip_cmake(requirement: str) -> str:
    """The CMake ``pip install '<requirement>'`` gets today: the newest release on PyPI
    (build.yaml ``cmake.pip_newest``) when the requirement allows it, else the highest
    version its own pins name (``cmake<4`` gets a 3.x: ``3.99`` stands for it)."""
    from packaging.requirements import InvalidRequirement, Requirement

    newest = str(_table()["cmake"]["pip_newest"])
    try:
        spec = Requirement(requirement).specifier
    except InvalidRequirement:
        return newest
    if not spec or spec.contains(newest, prereleases=True):
        return newest
    bounds = [s.version for s in spec if s.operator in ("==", "===", "<=", "~=")]
    allowed = [v for v in bounds if spec.contains(v, prereleases=True)]
    if allowed:
        return max(allowed, key=version_key)
    below = [version_key(s.version) for s in spec if s.operator == "<"]
    if below:
        # just under the lowest exclusive bound: `<4` -> 3.99, `<4.1` -> 4.0.99
        bound = list(min(below))
        while len(bound) > 1 and bound[-1] == 0:
            bound.pop()
        bound[-1] -= 1
        return ".".join(str(part) for part in [*bound, 99])
    return newest


def cmake_policy_env(cmake_version: str) -> dict[str, str]:
    """Environment needed for this CMake to configure PyTorch (CMake 4 needs a policy floor)."""
    cmake = _table()["cmake"]
    if version_key(cmake_version) >= version_key(str(cmake["policy_minimum_needed_from"])):
        return {str(k): str(v) for k, v in cmake["policy_minimum_env"].items()}
    return {}
