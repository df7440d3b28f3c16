"""CUDA toolkits: what each nvcc can compile, its host compilers, driver floor and images.

Everything here is read from ``fdl/data/compat/cuda.yaml``; adding a toolkit means adding a
table entry, not code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from fdl.compat._data import CompatDataError, load_table, require, verified, version_key
from fdl.compat.archs import ArchList, Capability, Kind, Target, gpu_driver_floor, parse_archs
from fdl.errors import UsageError

__all__ = [
    "CudaImage",
    "DriverCheck",
    "HostCompilers",
    "PtxJitFloor",
    "Toolkit",
    "check_driver",
    "check_gpu_driver",
    "choose_toolkit",
    "compilable_toolkits",
    "host_compilers",
    "image_tag",
    "ptx_jit_driver",
    "ptx_jit_floor",
    "toolkit",
    "toolkits",
    "uncompilable_reason",
]


@dataclass(frozen=True)
class HostCompilers:
    """The newest host compilers a toolkit accepts (major versions)."""

    gcc: int
    clang: int
    verified: bool = True


@dataclass(frozen=True)
class CudaImage:
    """How a toolkit is published as ``nvidia/cuda`` images."""

    repository: str
    version: str
    ubuntu: tuple[str, ...]
    cudnn_tag: str
    verified: bool = True


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit release line (``12.8``).

    Attributes:
        version: ``major.minor``.
        targets: The cubin targets nvcc accepts (PTX is accepted for the same archs).
        compilers: Newest gcc/clang majors accepted as host compilers.
        driver_min: The oldest driver that runs code built with it.
        deprecated: Capabilities nvcc still compiles but warns about.
        renamed: Capabilities that this toolkit calls by another number (10.1 -> 11.0).
        image: The nvidia/cuda image tags for it.
    """

    version: str
    targets: ArchList
    compilers: HostCompilers
    driver_min: str
    driver_verified: bool
    image: CudaImage
    deprecated: frozenset[Capability] = frozenset()
    renamed: Mapping[Capability, Capability] = field(default_factory=dict)

    @property
    def major(self) -> int:
        return version_key(self.version)[0]

    @property
    def variant(self) -> str:
        """The PyTorch variant name: ``cu128``."""
        return "cu" + self.version.replace(".", "")

    def accepts(self, target: Target) -> bool:
        """True when nvcc of this toolkit can emit ``target``."""
        accepted = {(t.capability, t.suffix) for t in self.targets}
        if (target.capability, target.suffix) not in accepted:
            return False
        return target.virtual is None or (target.virtual, "") in accepted

    def problems(self, archs: ArchList) -> list[str]:
        """Why this toolkit cannot compile some of ``archs`` (empty when it can)."""
        return [self._problem(t) for t in archs if not self.accepts(t)]

    def _problem(self, target: Target) -> str:
        generation = target.capability.generation
        what = f"{target.code} ({generation})" if generation else target.code
        renamed = self.renamed.get(target.capability)
        if renamed is not None:
            return (
                f"CUDA {self.version} calls {target.code} sm_{renamed.number}{target.suffix}: "
                f"write {renamed}{target.suffix}"
            )
        return f"CUDA {self.version} cannot compile {what}; {_span_text(target)}"

    def deprecation_warnings(self, archs: ArchList) -> list[str]:
        """The archs nvcc will warn about (still compiled)."""
        return [t.code for t in archs if t.capability in self.deprecated]

    def nvcc_flags(self, archs: ArchList) -> list[str]:
        """Extra nvcc flags for ``archs``: silences deprecation warnings when there are any."""
        if self.deprecation_warnings(archs):
            return [str(load_table("cuda")["deprecated_targets_flag"])]
        return []


@dataclass(frozen=True)
class DriverCheck:
    """Whether a driver can run code from a toolkit.

    Attributes:
        gpu_floor: The floor that failed is a GPU's own (no driver before R570 knows
            Blackwell): no toolkit, older or newer, helps; only a newer driver does.
    """

    ok: bool
    driver: str
    required: str
    reason: str
    gpu_floor: bool = False

    @property
    def fix(self) -> str:
        """What to do when not ``ok``: the driver to install, and why nothing else helps."""
        if self.gpu_floor:
            return (
                f"upgrade the NVIDIA driver to {self.required} or newer (no libtorch, of any "
                "CUDA, runs on that GPU with an older driver)"
            )
        return f"upgrade the NVIDIA driver to {self.required} or newer"


def _resolve(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Apply ``inherit`` and ``archs_add`` (entries may inherit from earlier ones)."""
    done: dict[str, dict[str, Any]] = {}
    for entry in entries:
        version = str(require(entry, "version", "cuda.yaml toolkit"))
        merged: dict[str, Any] = {}
        parent = entry.get("inherit")
        if parent is not None:
            if str(parent) not in done:
                raise CompatDataError(f"cuda.yaml {version}: inherits unknown {parent}")
            merged = {k: v for k, v in done[str(parent)].items() if k != "archs_add"}
        merged.update({k: v for k, v in entry.items() if k not in ("inherit", "archs_add")})
        if "archs_add" in entry:
            merged["archs"] = f"{merged.get('archs', '')} {entry['archs_add']}"
        done[version] = merged
    return list(done.values())


def _build(entry: Mapping[str, Any], repository: str) -> Toolkit:
    where = f"cuda.yaml {entry.get('version')}"
    compilers, driver, image = (require(entry, k, where) for k in ("compilers", "driver", "image"))
    renamed = {
        Capability.from_number(int(old)): Capability.from_number(int(new))
        for old, new in (entry.get("renamed") or {}).items()
    }
    deprecated = parse_archs(entry["deprecated"]).capabilities if entry.get("deprecated") else ()
    return Toolkit(
        version=str(entry["version"]),
        targets=parse_archs(str(require(entry, "archs", where))),
        compilers=HostCompilers(
            int(compilers["gcc"]), int(compilers["clang"]), verified(compilers)
        ),
        driver_min=str(driver["min"]),
        driver_verified=verified(driver),
        image=CudaImage(
            repository,
            str(image["version"]),
            tuple(str(u) for u in image["ubuntu"]),
            str(image["cudnn_tag"]),
            verified(image),
        ),
        deprecated=frozenset(deprecated),
        renamed=renamed,
    )


@cache
def toolkits() -> tuple[Toolkit, ...]:
    """Every known toolkit, oldest first."""
    table = load_table("cuda")
    repository = str(table["image_repository"])
    built = [_build(entry, repository) for entry in _resolve(table["toolkits"])]
    return tuple(sorted(built, key=lambda t: version_key(t.version)))


def toolkit(version: str) -> Toolkit:
    """The toolkit for ``12.8``, ``12.8.1``, ``cu128`` or ``13`` (newest 13.x).

    Raises:
        UsageError: no such toolkit in the table.
    """
    text = version.strip().lower()
    if text.startswith("cu") and text[2:].isdigit():
        text = f"{text[2:-1]}.{text[-1]}"
    try:
        key = version_key(text)
    except ValueError:
        key = ()
    matches = [t for t in toolkits() if key and version_key(t.version)[: len(key)] == key[:2]]
    if not matches:
        known = ", ".join(t.version for t in toolkits())
        raise UsageError(f"unknown CUDA version {version!r}", hint=f"known: {known}")
    return matches[-1]


def _span(target: Target) -> list[Toolkit]:
    probe = Target(target.capability, Kind.CUBIN, target.suffix)
    return [t for t in toolkits() if t.accepts(probe)]


def _span_text(target: Target) -> str:
    able = _span(target)
    if not able:
        return "no known CUDA toolkit compiles it"
    first, last, newest = able[0], able[-1], toolkits()[-1]
    if last is newest:
        return f"CUDA {first.version} and newer compile it"
    if first is last:
        return f"only CUDA {first.version} compiles it"
    return f"CUDA {first.version} to {last.version} compile it"


def compilable_toolkits(archs: ArchList) -> list[Toolkit]:
    """The toolkits that can compile every target of ``archs``, newest first."""
    return [t for t in reversed(toolkits()) if not t.problems(archs)]


def uncompilable_reason(archs: ArchList) -> str:
    """Why no toolkit compiles ``archs`` together: each target's range of toolkits."""
    parts = []
    for target in archs:
        generation = target.capability.generation
        name = f"{target.code} ({generation})" if generation else target.code
        parts.append(f"{name}: {_span_text(target)}")
    return "; ".join(parts)


def choose_toolkit(archs: ArchList, *, allowed: Iterable[str] | None = None) -> Toolkit:
    """The newest toolkit that compiles every target of ``archs``.

    Args:
        archs: What to compile.
        allowed: Restrict the choice to these versions (e.g. the base images you have).

    Raises:
        UsageError: no toolkit can; the message gives each arch's toolkit range.
    """
    candidates = compilable_toolkits(archs)
    if allowed is not None:
        wanted = {toolkit(v).version for v in allowed}
        candidates = [t for t in candidates if t.version in wanted]
    if candidates:
        return candidates[0]
    shown = " + ".join(t.code for t in archs)
    raise UsageError(
        f"no CUDA toolkit can compile {shown} together ({uncompilable_reason(archs)})",
        hint="build separate libtorch variants for these GPUs, or drop the oldest arch",
    )


def host_compilers(cuda: str) -> HostCompilers:
    """The newest gcc/clang majors that ``cuda`` accepts as host compilers."""
    return toolkit(cuda).compilers


@dataclass(frozen=True)
class PtxJitFloor:
    """The oldest driver that JIT-compiles a toolkit's PTX.

    Attributes:
        driver: The driver version.
        toolkit: The toolkit whose own driver this is: the asked one, or the newest older
            one when the tables do not know the asked one's (a floor never falls with a
            newer toolkit, so that is a lower bound).
        verified: Read from a primary source (the table row says so).
    """

    driver: str
    toolkit: str
    verified: bool


def ptx_jit_floor(cuda: str) -> PtxJitFloor | None:
    """The toolkit's own (GA) driver, or, when the table has no value for it, the newest
    older toolkit's (never lower); None when no toolkit at or below it has one."""
    table = load_table("cuda").get("ptx_jit_driver", {})
    rows = table.get("versions") or {}
    wanted = version_key(toolkit(cuda).version)
    found: PtxJitFloor | None = None
    for version, row in sorted(rows.items(), key=lambda item: version_key(str(item[0]))):
        if version_key(str(version)) > wanted:
            break
        value = row.get("min") if isinstance(row, Mapping) else row
        if value:
            trusted = verified(table) and verified(row if isinstance(row, Mapping) else None)
            found = PtxJitFloor(str(value), str(version), trusted)
    return found


def ptx_jit_driver(cuda: str) -> str | None:
    """The toolkit's own (GA) driver: the oldest that JIT-compiles its PTX (minor-version
    compatibility does not cover PTX); for a toolkit whose own driver the tables do not
    know, the newest older toolkit's (:func:`ptx_jit_floor`); None when none is known."""
    floor = ptx_jit_floor(cuda)
    return floor.driver if floor else None


def check_gpu_driver(driver: str, gpus: Iterable[Capability]) -> DriverCheck:
    """Whether an NVIDIA driver supports these GPUs at all, whatever toolkit built the code:
    each GPU's ``driver_min`` in ``archs.yaml`` (R570 for Blackwell). The one rule that
    ``fdl diagnose``'s GPU lines, ``fdl setup``, ``libtorch build``/``download``, deploy's
    placement and ``fdl init`` ask."""
    need: str | None = None
    why = ""
    for gpu in sorted(set(gpus)):
        floor = gpu_driver_floor(gpu)
        if floor is not None and (need is None or version_key(floor) > version_key(need)):
            need = floor
            why = f"{gpu.label()} needs driver >= {floor} (no older driver supports it)"
    if need is None or version_key(driver) >= version_key(need):
        return DriverCheck(True, driver, need or "", f"driver {driver} supports these GPUs")
    return DriverCheck(False, driver, need, f"{why}, this one is {driver}", gpu_floor=True)


def check_driver(
    driver: str, cuda: str, *, gpus: Iterable[Capability] = (), ptx: bool = False
) -> DriverCheck:
    """Whether an NVIDIA driver (``576.88``) runs code built with toolkit ``cuda``.

    Args:
        gpus: The GPUs it must run on: a GPU newer than the driver is not supported at all
            (no driver before R570 knows Blackwell), whatever the toolkit's own floor.
        ptx: Some GPU runs the code by PTX JIT: the driver must be at least the toolkit's
            own driver (:func:`ptx_jit_driver`), not only its minor-version floor.
    """
    kit = toolkit(cuda)
    need, why = kit.driver_min, f"CUDA {kit.version} needs driver >= {kit.driver_min}"
    gpu_bound = False
    for gpu in sorted(set(gpus)):
        floor = gpu_driver_floor(gpu)
        if floor is not None and version_key(floor) > version_key(need):
            need, gpu_bound = floor, True
            why = f"{gpu.label()} needs driver >= {floor} (no older driver supports it)"
    jit = ptx_jit_floor(kit.version) if ptx else None
    if jit is not None and version_key(jit.driver) > version_key(need):
        need, gpu_bound = jit.driver, False
        own = (
            f">= {jit.driver}"
            if jit.toolkit == kit.version
            else f"(not in fdl's tables), at least CUDA {jit.toolkit}'s >= {jit.driver}"
        )
        why = (
            f"PTX JIT of CUDA {kit.version} code needs that toolkit's own driver {own} "
            "(minor-version compatibility covers cubins, not PTX)"
        )
    ok = version_key(driver) >= version_key(need)
    reason = (
        f"driver {driver} runs CUDA {kit.version} code" if ok else f"{why}, this one is {driver}"
    )
    return DriverCheck(ok, driver, need, reason, gpu_floor=gpu_bound and not ok)


def image_tag(cuda: str, flavour: str = "runtime", ubuntu: str | None = None) -> str:
    """The ``nvidia/cuda`` image for a toolkit: ``nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04``.

    Args:
        cuda: Toolkit version (``12.8``).
        flavour: ``base``, ``runtime``, ``devel``, ``cudnn-runtime`` or ``cudnn-devel``.
        ubuntu: Ubuntu release; the newest one published for the toolkit by default.

    Raises:
        UsageError: unknown flavour, or no image for that Ubuntu release.
    """
    kit = toolkit(cuda)
    flavours = tuple(load_table("cuda")["image_flavours"])
    if flavour not in flavours:
        raise UsageError(
            f"unknown image flavour {flavour!r}", hint=f"use one of {', '.join(flavours)}"
        )
    image = kit.image
    chosen = ubuntu or max(image.ubuntu, key=version_key)
    if chosen not in image.ubuntu:
        raise UsageError(
            f"nvidia/cuda has no CUDA {kit.version} image for Ubuntu {chosen}",
            hint=f"available: {', '.join(image.ubuntu)}",
        )
    kind = flavour.replace("cudnn", image.cudnn_tag, 1) if flavour.startswith("cudnn") else flavour
    return f"{image.repository}:{image.version}-{kind}-ubuntu{chosen}"
