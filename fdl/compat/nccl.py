"""NCCL builds and the GPUs they have code for (``fdl/data/compat/nccl.yaml``).

The facts were read from the NVIDIA NCCL wheels on PyPI (their ``libnccl.so.2``'s fatbin)
and from the torch wheels' ``Requires-Dist``: which NCCL a release loads, and which NCCL
wheels serve a given set of GPUs (the mixed rig: the cu12 wheels, no cu13 one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from fdl.compat._data import load_table, version_key
from fdl.compat.archs import ArchList, Capability
from fdl.compat.rules import runs_on

__all__ = ["NcclWheel", "nccl_wheel", "nccl_wheels", "torch_nccl", "wheels_covering"]


@dataclass(frozen=True)
class NcclWheel:
    """One NCCL wheel on PyPI and the GPU code of its ``libnccl.so.2``."""

    package: str
    version: str
    cubins: tuple[str, ...]
    ptx: tuple[str, ...]
    file: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def targets(self) -> ArchList:
        from fdl.compat.archs import parse_archs

        return parse_archs([*self.cubins, *self.ptx])

    def missing(self, gpus: Iterable[Capability]) -> list[Capability]:
        """The GPUs none of its code runs on."""
        targets = self.targets
        return [gpu for gpu in gpus if not runs_on(targets, gpu).ok]


@cache
def nccl_wheels() -> tuple[NcclWheel, ...]:
    """Every NCCL wheel the table has read, oldest first within a package."""
    rows = load_table("nccl")["wheels"]
    return tuple(
        NcclWheel(
            package=str(r["package"]),
            version=str(r["version"]),
            cubins=tuple(str(c) for c in r["cubins"]),
            ptx=tuple(str(c) for c in r.get("ptx") or ()),
            file=str(r["file"]),
            sha256=str(r["sha256"]),
        )
        for r in rows
    )


def nccl_wheel(package: str, version: str) -> NcclWheel | None:
    return next((w for w in nccl_wheels() if (w.package, w.version) == (package, version)), None)


def torch_nccl(torch: str | None) -> NcclWheel | None:
    """The NCCL wheel the PyPI wheel of torch ``torch`` (``2.10.0``) requires, when read."""
    if not torch:
        return None
    for row in load_table("nccl")["torch_pins"]:
        if str(row["torch"]) == torch:
            wanted = row["requires"]
            return nccl_wheel(str(wanted["package"]), str(wanted["version"]))
    return None


def wheels_covering(gpus: Iterable[Capability]) -> list[NcclWheel]:
    """The wheels with code for every one of ``gpus``, newest first."""
    caps = list(gpus)
    fitting = [w for w in nccl_wheels() if not w.missing(caps)]
    return sorted(fitting, key=lambda w: (w.package, version_key(w.version)), reverse=True)
