"""Machine resources: free disk, memory, CPU cores (read from the OS, no programs run)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from fdl.system.probe import Probe

__all__ = ["Cpu", "Memory", "cpu", "disk_free", "glibc_version", "memory"]

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Memory:
    """RAM in MiB. ``limit_mib`` is a cgroup limit (containers), when one is set."""

    total_mib: int
    available_mib: int
    limit_mib: int | None = None

    @property
    def usable_mib(self) -> int:
        """What a build can count on: available memory, capped by the cgroup limit."""
        return min(self.available_mib, self.limit_mib) if self.limit_mib else self.available_mib


@dataclass(frozen=True)
class Cpu:
    """CPU cores: all logical ones, and those this process may use."""

    logical: int
    usable: int
    model: str | None = None


def disk_free(path: Path | str) -> Probe[int]:
    """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
    current = Path(os.path.expanduser(path)).absolute()
    while not current.exists() and current.parent != current:
        current = current.parent
    try:
        return Probe(shutil.disk_usage(current).free, path=str(current))
    except OSError as exc:
        return Probe.missing(f"cannot stat {current}: {exc.strerror or exc}", str(current))


def _meminfo(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key.strip()] = int(parts[0])  # kB
    return values


def _cgroup_limit(cgroup: Path) -> int | None:
    try:
        text = (cgroup / "memory.max").read_text().strip()
    except OSError:
        return None
    return int(text) // _MIB if text.isdigit() else None


def memory(
    meminfo: Path = Path("/proc/meminfo"), cgroup: Path = Path("/sys/fs/cgroup")
) -> Probe[Memory]:
    """Total and available RAM (Linux ``/proc/meminfo``), and a cgroup limit if any."""
    try:
        values = _meminfo(meminfo.read_text())
    except OSError as exc:
        return Probe.missing(f"cannot read {meminfo}: {exc.strerror or exc}")
    if "MemTotal" not in values:
        return Probe.missing(f"{meminfo} has no MemTotal line")
    total = values["MemTotal"] // 1024
    available = values.get("MemAvailable", values.get("MemFree", 0)) // 1024
    limit = _cgroup_limit(cgroup)
    return Probe(Memory(total, available, limit), path=str(meminfo))


def _cpu_model(cpuinfo: Path) -> str | None:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        return None
    return None


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> Probe[Cpu]:
    """Logical cores, the cores this process may run on, and the model name."""
    logical = os.cpu_count()
    if logical is None:
        return Probe.missing("the OS does not report a CPU count")
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = logical
    return Probe(Cpu(logical, usable, _cpu_model(cpuinfo)))


def glibc_version() -> str | None:
    """This machine's glibc release (``2.36``); None where the C library is not glibc."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    return found.split()[-1] if found.startswith("glibc ") else None
