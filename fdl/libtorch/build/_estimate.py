"""How long a source build takes and how much RAM it needs, before it starts (pure).

The figures come from ``fdl/data/compat/build_estimate.yaml`` (translation units by kind for
a release, the fake tree's measured seconds per TU and per -gencode target, one scale factor
to PyTorch's real TUs) and ``build.yaml`` (RAM per compile job). Everything here is an
estimate and says so: :attr:`BuildEstimate.basis` is printed with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fdl.compat import (
    ArchList,
    CompatDataError,
    load_table,
    memory_per_job_gb,
    parse_archs,
    version_key,
)

__all__ = ["BuildEstimate", "estimate_build", "estimate_table"]

_OFF = ("0", "OFF", "FALSE", "NO")


@dataclass(frozen=True)
class BuildEstimate:
    """An estimate of one build's wall time and peak RAM.

    Attributes:
        seconds: Wall-clock seconds of the compile (configure and links not counted).
        cpu_seconds: CPU seconds of all compiles together.
        jobs: Parallel compile jobs (``MAX_JOBS``); parallel: the jobs that run at once
            (``min(jobs, cores)``).
        peak_gb: ``jobs`` x the RAM of the heaviest compile job.
        ram_gb: The machine's RAM.
        fits_jobs: The most jobs whose peak fits in ``ram_gb``.
        units: Translation units by kind (``cxx``, ``cuda``, ``flash``).
        targets: -gencode targets each CUDA TU is compiled for.
        basis: What the figures rest on, one line.
    """

    seconds: float
    cpu_seconds: float
    jobs: int
    parallel: int
    peak_gb: float
    ram_gb: float
    fits_jobs: int
    units: Mapping[str, int]
    targets: int
    basis: str

    @property
    def over_memory(self) -> bool:
        return self.peak_gb > self.ram_gb

    def duration(self) -> str:
        """``~4h 10m`` (or ``~25m``)."""
        minutes = max(1, round(self.seconds / 60))
        hours, minutes = divmod(minutes, 60)
        return f"~{hours}h {minutes:02d}m" if hours else f"~{minutes}m"

    def summary(self) -> str:
        """The plan's line: ``~4h 10m on 8 jobs, peak ~40 GB (basis: ...; an estimate)``."""
        text = f"{self.duration()} on {self.jobs} jobs"
        if self.parallel < self.jobs:
            text += f" ({self.parallel} cores)"
        text += f", peak ~{self.peak_gb:.0f} GB"
        if self.over_memory:
            text += (
                f" (more than the {self.ram_gb:g} GB of RAM: "
                f"MAX_JOBS={self.fits_jobs} fits, --jobs {self.fits_jobs})"
            )
        return f"{text} (basis: {self.basis}; an estimate)"

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds),
            "cpu_seconds": round(self.cpu_seconds),
            "jobs": self.jobs,
            "parallel": self.parallel,
            "peak_gb": round(self.peak_gb, 1),
            "ram_gb": self.ram_gb,
            "over_memory": self.over_memory,
            "fits_jobs": self.fits_jobs,
            "units": dict(self.units),
            "targets": self.targets,
            "basis": self.basis,
            "summary": self.summary(),
            "estimate": True,
        }


def estimate_table() -> Mapping[str, Any]:
    """``build_estimate.yaml``, read once."""
    return load_table("build_estimate")


def _release(torch: str) -> Mapping[str, Any]:
    key = version_key(torch)
    for entry in estimate_table()["releases"]:
        if version_key(str(entry["torch"])) <= key <= version_key(str(entry["until_torch"])):
            return dict(entry)
    releases = estimate_table()["releases"]
    # An older release than any counted: the oldest counts are the nearest there are.
    if releases and key < version_key(str(releases[0]["torch"])):
        return dict(releases[0])
    raise CompatDataError(f"build_estimate.yaml: no translation-unit counts cover torch {torch}")


def _on(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "1").upper() not in _OFF


def estimate_build(
    *,
    torch: str,
    archs: ArchList | str,
    jobs: int,
    cores: int,
    ram_gb: float,
    flash_attention: bool = True,
    switches: Mapping[str, str] | None = None,
) -> BuildEstimate:
    """Estimate a build of ``torch`` for ``archs`` with ``jobs`` compile jobs.

    ``switches`` are the build's ``USE_*`` variables: ``USE_MEM_EFF_ATTENTION=0`` and
    ``USE_DISTRIBUTED=0`` drop their translation units; ``flash_attention=False`` drops the
    flash-attention kernels (and their ~5 GB per job). An empty ``archs`` is a CPU build.
    """
    if isinstance(archs, str):
        targets = parse_archs(archs) if archs.strip() else ArchList()
    else:
        targets = archs
    env = dict(switches or {})
    table = estimate_table()
    fake = table["fake_tree"]
    scale = table["scale"]
    counts = _release(torch)
    cuda = bool(targets)
    flash = cuda and flash_attention and _on(env, "USE_FLASH_ATTENTION")

    n_targets = len(targets)
    floor = version_key(str(table["flash_min_capability"]))
    flash_targets = sum(1 for t in targets if version_key(str(t.capability)) >= floor)
    cxx = int(counts["cxx"]) - (
        0 if _on(env, "USE_DISTRIBUTED") else int(counts["distributed_cxx"])
    )
    cu = 0
    if cuda:
        cu = int(counts["cuda"]) - (
            0 if _on(env, "USE_MEM_EFF_ATTENTION") else int(counts["mem_eff"])
        )
    n_flash = int(counts["flash"]) if flash else 0

    # Real seconds = the fake tree's seconds x a factor per kind (build_estimate.yaml scale).
    cxx_host = float(fake["cxx"]["host"])
    cu_host, cu_target = float(fake["cuda"]["host"]), float(fake["cuda"]["per_target"])
    fake_anchor = int(counts["cxx"]) * cxx_host + int(counts["cuda"]) * (
        cu_host + int(scale["build_targets"]) * cu_target
    )
    other = float(scale["build_core_s"]) / fake_anchor
    flash_scale = float(scale["flash_per_target_s"]) / float(fake["flash"]["per_target"])

    cpu = other * (cxx * cxx_host + cu * (cu_host + n_targets * cu_target))
    cpu += n_flash * (
        flash_scale * float(fake["flash"]["host"])
        + flash_targets * float(scale["flash_per_target_s"])
        + (n_targets - flash_targets) * other * cu_target
    )
    if not cuda:
        # A CPU build compiles the host parts of no CUDA TU at all.
        units = {"cxx": cxx}
    else:
        units = {"cxx": cxx, "cuda": cu, "flash": n_flash}
    parallel = max(1, min(jobs, cores))
    per_job = memory_per_job_gb(flash_attention=flash)
    peak = jobs * per_job
    basis = (
        f"{sum(units.values())} TUs of torch {counts['torch']}.x ({_units_text(units)}) x "
        f"{n_targets or 'no'} CUDA target{'s' if n_targets != 1 else ''}, the fake tree's "
        f"measured s per TU and target scaled to published builds (x{other:.1f}, flash "
        f"x{flash_scale:.0f}), {per_job:g} GB per job"
    )
    return BuildEstimate(
        seconds=cpu / parallel,
        cpu_seconds=cpu,
        jobs=jobs,
        parallel=parallel,
        peak_gb=peak,
        ram_gb=ram_gb,
        fits_jobs=max(1, int(ram_gb // per_job)),
        units=units,
        targets=n_targets,
        basis=basis,
    )


def _units_text(units: Mapping[str, int]) -> str:
    names = {"cxx": "C++", "cuda": ".cu", "flash": "flash .cu"}
    return ", ".join(f"{count} {names[kind]}" for kind, count in units.items() if count)
