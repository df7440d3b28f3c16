"""NVIDIA GPUs on this machine: through NVML (NVIDIA's ``nvidia-ml-py`` binding) when the
driver's library is there, else ``nvidia-smi`` (via the Runner seam).

NVML reports the compute capability on every driver (``nvidia-smi`` lacks the field before
R510) and sees MIG instances. ``FDL_NVML=0`` skips it (tests that fake ``nvidia-smi`` set it,
so a machine with real GPUs gives them the fake ones).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from fdl.compat.archs import Capability
from fdl.errors import FdlError
from fdl.runner import Runner, default_runner

__all__ = [
    "QUERY",
    "QUERY_WITHOUT_CAP",
    "WSL_NVIDIA_SMI",
    "Gpu",
    "GpuReport",
    "detect_gpus",
    "parse_gpu_csv",
    "read_nvml",
]

# Under WSL 2 the driver's nvidia-smi lives here and is often not on PATH.
WSL_NVIDIA_SMI = Path("/usr/lib/wsl/lib/nvidia-smi")

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
        mig_instances: MIG instances carved out of it (0: MIG off or not known).
    """

    index: int
    name: str
    capability: Capability | None
    memory_mib: int | None
    driver: str | None
    mig_instances: int = 0

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
        source: Where the list came from: ``nvml`` or ``nvidia-smi`` (empty: nowhere).
    """

    gpus: tuple[Gpu, ...] = ()
    driver: str | None = None
    reason: str | None = None
    source: str = ""

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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_module() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")  # nvidia-ml-py (the nvml extra)
    except ImportError:
        return None


def read_nvml(load: Callable[[], ModuleType | None] = _nvml_module) -> GpuReport | None:
    """The GPUs as NVML lists them, or None when NVML cannot be used here (the binding is
    not installed, or the driver's ``libnvidia-ml`` is missing or fails to start).

    Args:
        load: Returns the ``pynvml`` module (tests pass a stand-in with the same API).
    """
    nvml = load()
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    capability=Capability(int(major), int(minor)),
                    memory_mib=int(memory),
                    driver=driver,
                    mig_instances=_mig_instances(nvml, handle),
                )
            )
    except nvml.NVMLError as exc:
        return GpuReport(reason=f"NVML failed while listing the GPUs: {exc}", source="nvml")
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
    reason = None if gpus else "NVML lists no GPU"
    return GpuReport(tuple(gpus), driver, reason, source="nvml")


def _mig_instances(nvml: ModuleType, handle: object) -> int:
    """How many MIG instances the GPU holds (0 when MIG is off or not supported)."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:  # not a MIG-capable GPU
        return 0
    if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return 0
    count = 0
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nvml.NVMLError:  # an empty slot
            continue
        count += 1
    return count


def detect_gpus(
    runner: Runner | None = None,
    *,
    nvml: Callable[[], GpuReport | None] | None = None,
    environ: dict[str, str] | None = None,
) -> GpuReport:
    """The NVIDIA GPUs visible here; an empty report with the reason when there are none.

    NVML first (unless ``FDL_NVML=0``), then ``nvidia-smi`` (on PATH, or WSL's). Never
    raises for a missing or failing NVML or ``nvidia-smi``.
    """
    env = os.environ if environ is None else environ
    if env.get("FDL_NVML", "1") != "0":
        listed = (nvml or read_nvml)()
        if listed is not None and listed.gpus:
            return listed
    return _from_nvidia_smi(runner or default_runner())


def _from_nvidia_smi(run: Runner) -> GpuReport:
    program = "nvidia-smi"
    if run.which(program) is None:
        if not WSL_NVIDIA_SMI.is_file():
            return GpuReport(reason="nvidia-smi not found on PATH (no NVIDIA driver here)")
        program = str(WSL_NVIDIA_SMI)  # WSL 2: the driver's copy, not on PATH
    query, without_cap = [program, *QUERY[1:]], [program, *QUERY_WITHOUT_CAP[1:]]
    try:
        result = run.run(query, check=False, timeout=30)
    except FdlError as exc:
        return GpuReport(reason=f"nvidia-smi could not run: {exc.message}")
    with_cap = True
    if result.returncode != 0 and "compute_cap" in f"{result.stdout}{result.stderr}":
        with_cap = False
        try:
            result = run.run(without_cap, check=False, timeout=30)
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
    return GpuReport(tuple(gpus), driver, reason, source="nvidia-smi")
