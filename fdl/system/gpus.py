"""NVIDIA GPUs on this machine, through ``nvidia-smi`` (via the Runner seam)."""

from __future__ import annotations

from dataclasses import dataclass

from fdl.compat.archs import Capability
from fdl.errors import FdlError
from fdl.runner import Runner, default_runner

__all__ = ["QUERY", "QUERY_WITHOUT_CAP", "Gpu", "GpuReport", "detect_gpus", "parse_gpu_csv"]

QUERY = [
    "nvidia-smi",
    "--query-gpu=index,name,compute_cap,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
# Drivers before R510 (R470 is the last for Kepler) have no compute_cap field: ask without
# it and take the capability from the GPU's name (fdl.compat.capability_from_name).
QUERY_WITHOUT_CAP = [
    "nvidia-smi",
    "--query-gpu=index,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
_UNKNOWN = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]"}


@dataclass(frozen=True)
class Gpu:
    """One GPU as ``nvidia-smi`` reports it.

    Attributes:
        index: nvidia-smi's index.
        name: ``NVIDIA GeForce GTX 1060 6GB``.
        capability: Compute capability (None when the driver does not report it).
        memory_mib: Total memory in MiB, if reported.
        driver: The driver version (``576.88``), if reported.
    """

    index: int
    name: str
    capability: Capability | None
    memory_mib: int | None
    driver: str | None

    @property
    def short_name(self) -> str:
        """The name without the ``NVIDIA`` / ``GeForce`` prefixes."""
        return self.name.replace("NVIDIA ", "").replace("GeForce ", "").strip()

    @property
    def sm(self) -> str | None:
        return self.capability.sm if self.capability else None


@dataclass(frozen=True)
class GpuReport:
    """The GPUs found, or why none could be listed.

    Attributes:
        gpus: The GPUs, by index.
        driver: The driver version (from the first GPU), if any.
        reason: Why the list is empty or incomplete (no nvidia-smi, driver error, ...).
    """

    gpus: tuple[Gpu, ...] = ()
    driver: str | None = None
    reason: str | None = None

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        """The distinct capabilities, sorted."""
        return tuple(sorted({g.capability for g in self.gpus if g.capability is not None}))


def _value(text: str) -> str | None:
    text = text.strip()
    return None if text.lower() in _UNKNOWN else text


def _capability(text: str | None) -> Capability | None:
    if text is None:
        return None
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return Capability(int(major), int(minor))


def parse_gpu_csv(output: str, *, with_cap: bool = True) -> tuple[list[Gpu], list[str]]:
    """Parse ``nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version``
    (``with_cap=False``: the same without ``compute_cap``, the capability then taken from
    the GPU's name).

    A name may contain commas, so the fields are taken from both ends of the line.

    Returns:
        (GPUs, lines that could not be read).
    """
    from fdl.compat import capability_from_name

    gpus: list[Gpu] = []
    bad: list[str] = []
    tail = 3 if with_cap else 2
    for line in output.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 2 + tail or not fields[0].isdigit():
            bad.append(line)
            continue
        index, memory, driver = fields[0], fields[-2], fields[-1]
        name = ", ".join(fields[1:-tail])
        capability = _capability(_value(fields[-3])) if with_cap else capability_from_name(name)
        mem = _value(memory)
        gpus.append(
            Gpu(
                index=int(index),
                name=name,
                capability=capability,
                memory_mib=int(float(mem)) if mem and mem.replace(".", "", 1).isdigit() else None,
                driver=_value(driver),
            )
        )
    return sorted(gpus, key=lambda g: g.index), bad


def detect_gpus(runner: Runner | None = None) -> GpuReport:
    """The NVIDIA GPUs visible here; an empty report with the reason when there are none.

    Never raises for a missing or failing ``nvidia-smi``.
    """
    run = runner or default_runner()
    if run.which("nvidia-smi") is None:
        return GpuReport(reason="nvidia-smi not found on PATH (no NVIDIA driver here)")
    try:
        result = run.run(QUERY, check=False, timeout=30)
    except FdlError as exc:
        return GpuReport(reason=f"nvidia-smi could not run: {exc.message}")
    with_cap = True
    if result.returncode != 0 and "compute_cap" in f"{result.stdout}{result.stderr}":
        with_cap = False
        try:
            result = run.run(QUERY_WITHOUT_CAP, check=False, timeout=30)
        except FdlError as exc:
            return GpuReport(reason=f"nvidia-smi could not run: {exc.message}")
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
        return GpuReport(
            reason=f"nvidia-smi exited with status {result.returncode}: {tail[0]}".rstrip(": ")
        )
    gpus, bad = parse_gpu_csv(result.stdout, with_cap=with_cap)
    reason = None
    unknown = [g for g in gpus if g.capability is None]
    if bad:
        reason = f"could not read {len(bad)} line(s) of nvidia-smi output: {bad[0]!r}"
    elif not gpus:
        reason = "nvidia-smi lists no GPU"
    elif unknown:
        names = ", ".join(f"GPU {g.index} ({g.name})" for g in unknown)
        reason = (
            f"cannot tell the compute capability of {names}: the driver does not report it "
            "(no compute_cap before R510) and fdl's table does not know the name; name the "
            "archs yourself (e.g. --archs 3.5)"
        )
    elif not with_cap:
        reason = (
            "the driver does not report compute capabilities (no compute_cap before R510): "
            "taken from the GPU names"
        )
    driver = next((g.driver for g in gpus if g.driver), None)
    return GpuReport(tuple(gpus), driver, reason)
