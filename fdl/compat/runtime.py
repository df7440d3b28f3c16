"""Run-time libraries of a CUDA libtorch: what it needs, where each one comes from.

Read from ``fdl/data/compat/runtime.yaml``. The image builder uses this to fill a slim image:
the sonames to copy (including those loaded with ``dlopen``, which no DT_NEEDED names), the
NVIDIA PyPI wheel that provides each, and which ``nvidia/cuda`` flavour already has it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from fdl.compat._data import CompatDataError, load_table, verified, version_key
from fdl.errors import UsageError

__all__ = [
    "RuntimeLibrary",
    "image_flavour_libraries",
    "injected_libraries",
    "is_switched_off",
    "library_for_soname",
    "runtime_libraries",
]

_OFF = {"0", "off", "false", "no", "n"}


@dataclass(frozen=True)
class RuntimeLibrary:
    """One library (or family of libraries) a CUDA libtorch needs at run time.

    Attributes:
        id: Short name (``cudnn``).
        title: What it is.
        cuda_major: The CUDA major these sonames are for.
        sonames: Loaded through DT_NEEDED (shell globs allowed).
        dlopened: Loaded with dlopen by the library itself; copy them too.
        wheel: The NVIDIA PyPI package that provides it (None for system libraries).
        wheel_dir: Where the wheel puts it, relative to site-packages.
        unless: Build switches that remove the need when set to 0.
        system: Comes from the OS (zlib), not from NVIDIA.
        images: nvidia/cuda flavours that already contain it.
        size_mb: Unpacked size, when measured.
        debian_package: The Debian/Ubuntu package of a system library.
    """

    id: str
    title: str
    cuda_major: int
    sonames: tuple[str, ...]
    dlopened: tuple[str, ...] = ()
    wheel: str | None = None
    wheel_dir: str | None = None
    unless: tuple[str, ...] = ()
    system: bool = False
    images: tuple[str, ...] = ()
    size_mb: int | None = None
    debian_package: str | None = None
    verified: bool = True

    @property
    def all_sonames(self) -> tuple[str, ...]:
        return self.sonames + self.dlopened

    def matches(self, soname: str) -> bool:
        """True when ``soname`` is one of this library's files."""
        return any(fnmatch.fnmatchcase(soname, pattern) for pattern in self.all_sonames)


def is_switched_off(value: object) -> bool:
    """True for build switch values that mean off (0, OFF, false, no)."""
    if isinstance(value, bool):
        return not value
    return str(value).strip().lower() in _OFF


def _cuda_major(cuda: str) -> int:
    text = cuda.strip().lower()
    if text.startswith("cu") and text[2:].isdigit():
        return int(text[2:-1])
    try:
        return version_key(text)[0]
    except ValueError:
        raise UsageError(
            f"not a CUDA version or variant: {cuda!r}", hint="e.g. 13.0 or cu130"
        ) from None


@cache
def _flavours() -> dict[str, frozenset[str]]:
    images: Mapping[str, Any] = load_table("runtime")["images"]
    resolved: dict[str, frozenset[str]] = {}

    def contents(name: str, seen: tuple[str, ...] = ()) -> frozenset[str]:
        if name in seen:
            raise CompatDataError(f"runtime.yaml: image flavours extend in a loop: {seen}")
        entry = images[name]
        parent = contents(entry["extends"], (*seen, name)) if entry.get("extends") else frozenset()
        return parent | frozenset(entry.get("libraries", ()))

    for name in images:
        resolved[name] = contents(name)
    return resolved


@cache
def _libraries(major: int) -> tuple[RuntimeLibrary, ...]:
    flavours = _flavours()
    result = []
    for entry in load_table("runtime")["libraries"]:
        per_cuda = (entry.get("cuda") or {}).get(str(major))
        if per_cuda is None:
            continue
        result.append(
            RuntimeLibrary(
                id=entry["id"],
                title=entry.get("title", entry["id"]),
                cuda_major=major,
                sonames=tuple(per_cuda["sonames"]),
                dlopened=tuple(per_cuda.get("dlopened", ())),
                wheel=per_cuda.get("wheel"),
                wheel_dir=per_cuda.get("wheel_dir"),
                unless=tuple(entry.get("unless", ())),
                system=bool(entry.get("system", False)),
                images=tuple(sorted(f for f, libs in flavours.items() if entry["id"] in libs)),
                size_mb=entry.get("size_mb"),
                debian_package=per_cuda.get("debian_package"),
                verified=verified(per_cuda),
            )
        )
    return tuple(result)


def runtime_libraries(
    cuda: str, *, switches: Mapping[str, object] | None = None
) -> list[RuntimeLibrary]:
    """The libraries a libtorch built for ``cuda`` needs at run time.

    Args:
        cuda: ``13.0``, ``13`` or a variant name (``cu130``).
        switches: The build's switches (``{"USE_KINETO": "0"}``); a library whose ``unless``
            switch is off is left out.

    Raises:
        UsageError: no runtime table for that CUDA major.
    """
    major = _cuda_major(cuda)
    libraries = _libraries(major)
    if not libraries:
        raise UsageError(
            f"no run-time library table for CUDA {major}", hint="fdl knows CUDA 12 and 13 libraries"
        )
    given = switches or {}
    return [
        lib
        for lib in libraries
        if not any(name in given and is_switched_off(given[name]) for name in lib.unless)
    ]


def library_for_soname(soname: str, cuda: str) -> RuntimeLibrary | None:
    """The table entry that provides ``soname`` (``libcublasLt.so.13``), if any."""
    return next((lib for lib in _libraries(_cuda_major(cuda)) if lib.matches(soname)), None)


def injected_libraries() -> tuple[str, ...]:
    """Sonames the NVIDIA container runtime injects from the host (never ship them)."""
    return tuple(str(item["soname"]) for item in load_table("runtime")["injected"])


def image_flavour_libraries(flavour: str) -> frozenset[str]:
    """The library ids an ``nvidia/cuda`` flavour contains (``runtime`` -> cudart, cublas, ...).

    Raises:
        UsageError: unknown flavour.
    """
    flavours = _flavours()
    if flavour not in flavours:
        raise UsageError(
            f"unknown image flavour {flavour!r}", hint=f"use one of {', '.join(flavours)}"
        )
    return flavours[flavour]
