"""What a libtorch tree really contains: GPU code per library, C++ ABI, version files.

The GPU archs come from the ``.nv_fatbin`` sections of torch's own libraries (read with
:mod:`fdl.binaries`, no CUDA toolkit needed), never from documentation: the 2.14.1 cu130
wheel is documented as ``12.0+PTX`` and holds no PTX at all.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.binaries import BinaryFormatError, DeviceCode, is_elf, read_device_code
from fdl.binaries.elf import needed
from fdl.compat import ArchList, Capability, Match, Target, Verdict, runs_on

__all__ = [
    "DeviceScan",
    "detect_abi",
    "detect_cuda",
    "read_build_version",
    "scan_device_code",
    "torch_libraries",
]

# torch's own libraries; the NVIDIA libraries beside them carry their own device code.
TORCH_LIBRARY_PREFIXES = ("libtorch", "libc10", "libcaffe2")
_CXX11_MARKER = b"St7__cxx11"  # in mangled names of std::__cxx11::basic_string & co


def torch_libraries(lib_dir: Path) -> list[Path]:
    """torch's own shared libraries in ``lib_dir`` (one path per file, sorted); a linker
    script standing in for one (a CPU view's ``libtorch.so``) is not a library."""
    if not lib_dir.is_dir():
        return []
    seen: set[Path] = set()
    result = []
    for path in sorted(lib_dir.iterdir()):
        if not path.name.startswith(TORCH_LIBRARY_PREFIXES) or ".so" not in path.name:
            continue
        real = path.resolve()
        if real in seen or not real.is_file() or not _is_elf(real):
            continue
        seen.add(real)
        result.append(path)
    return result


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return True  # unreadable: the readers say why


@dataclass(frozen=True)
class DeviceScan:
    """The GPU code found in a tree's libraries.

    Attributes:
        libraries: Each torch library that holds GPU code.
        errors: (library, why) for libraries that could not be read.
    """

    libraries: tuple[DeviceCode, ...] = ()
    errors: tuple[tuple[str, str], ...] = ()

    @property
    def has_device_code(self) -> bool:
        return bool(self.libraries)

    @property
    def main(self) -> DeviceCode | None:
        """The library with the most GPU code (``libtorch_cuda.so``): it defines the variant."""
        if not self.libraries:
            return None
        return max(self.libraries, key=lambda c: sum(1 for e in c.entries if e.is_code))

    @property
    def targets(self) -> ArchList:
        """The targets the variant was built for: the main library's primary targets."""
        main = self.main
        return main.primary_targets() if main is not None else ArchList()

    @property
    def extras(self) -> ArchList:
        """Targets present for some kernels only (``sm_121a`` in libtorch 2.14.1)."""
        everything: set[Target] = set()
        for code in self.libraries:
            everything |= set(code.targets)
        return ArchList.of(everything - set(self.targets))

    def archs_found(self) -> dict[str, list[str]]:
        """For ``variant.json``: ``{"cubin": [...], "ptx": [...], "extra": [...]}``."""
        targets = self.targets
        return {
            "cubin": [t.code for t in targets.cubins],
            "ptx": [t.code for t in targets.ptx],
            "extra": self.extras.codes(),
        }

    def verdict(self, gpu: Capability) -> Verdict:
        """How ``gpu`` runs the variant (judged on the main library)."""
        main = self.main
        if main is None:
            return Verdict(gpu, Match.NONE, None, "the libraries hold no GPU code (a CPU build)")
        return runs_on(main.primary_targets(), gpu)

    def verdicts(self, gpus: Iterable[Capability]) -> list[Verdict]:
        return [self.verdict(g) for g in gpus]

    def gaps(self, gpu: Capability) -> list[tuple[str, Verdict]]:
        """Other GPU libraries with no code for ``gpu`` (some of their kernels will fail)."""
        main = self.main
        result = []
        for code in self.libraries:
            if code is main:
                continue
            verdict = runs_on(code.primary_targets(), gpu)
            if not verdict.ok:
                result.append((code.path.name, verdict))
        return result

    def per_library(self) -> list[dict[str, Any]]:
        """One entry per GPU library: name, primary targets, summary."""
        return [
            {
                "library": code.path.name,
                "targets": code.primary_targets().codes(),
                "summary": code.summary(),
                "entries": sum(1 for e in code.entries if e.is_code),
            }
            for code in self.libraries
        ]


def scan_device_code(tree: Path, libraries: Sequence[Path] | None = None) -> DeviceScan:
    """Read the GPU code of torch's libraries under ``tree/lib``."""
    found: list[DeviceCode] = []
    errors: list[tuple[str, str]] = []
    for path in libraries if libraries is not None else torch_libraries(tree / "lib"):
        if not is_elf(path):
            continue
        try:
            code = read_device_code(path)
        except BinaryFormatError as exc:
            errors.append((path.name, exc.message))
            continue
        if code.has_device_code:
            found.append(code)
    return DeviceScan(tuple(found), tuple(errors))


def detect_abi(tree: Path) -> str | None:
    """``cxx11`` or ``pre-cxx11``, from libc10's symbol names; None when there is no libc10."""
    library = tree / "lib" / "libc10.so"
    if not library.is_file():
        return None
    with library.open("rb") as handle:
        try:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return None
        with data:
            return "cxx11" if data.find(_CXX11_MARKER) >= 0 else "pre-cxx11"


def read_build_version(tree: Path) -> str | None:
    """The ``build-version`` file's text (``2.8.0+cu128``), if the tree has one."""
    from fdl._files import read_small_text

    try:
        text = (read_small_text(tree / "build-version", limit=4096) or "").strip()
    except OSError:  # absent, unreadable, or not a small UTF-8 file: version unknown
        return None
    return text or None


_CUDA_TAG = re.compile(r"\+cu(\d+)(\d)$")  # +cu128 -> 12.8, +cu130 -> 13.0
_CUDART = re.compile(r"^libcudart(?:-[0-9a-f]+)?\.so\.(\d+)")


def detect_cuda(tree: Path, scan: DeviceScan | None = None) -> tuple[str | None, str]:
    """Whether the tree is a CUDA build and which CUDA, from its binaries: GPU code in
    torch's libraries or a ``libtorch_cuda.so``, the CUDA runtime major its libraries
    need (``libcudart.so.12``); the minor from ``build-version`` (``+cu128``) when its
    major agrees. Returns (``12.8`` or None, how it was found); a tree without CUDA
    binaries is a CPU build whatever its ``build-version`` says (the CPU view of a
    ``+cu128`` wheel).
    """
    lib = tree / "lib"
    cuda_library = lib / "libtorch_cuda.so"
    found = scan if scan is not None else scan_device_code(tree)
    if not (found.has_device_code or cuda_library.is_file()):
        return None, "no CUDA code in its libraries"
    majors: set[str] = set()
    for path in [cuda_library, *torch_libraries(lib)]:
        if not path.is_file() or not is_elf(path):
            continue
        try:
            names = needed(path)
        except BinaryFormatError:
            continue
        majors.update(m.group(1) for n in names if (m := _CUDART.match(n)))
    tag = _CUDA_TAG.search(read_build_version(tree) or "")
    tagged = f"{tag.group(1)}.{tag.group(2)}" if tag else None
    if tagged and (not majors or tagged.split(".")[0] in majors):
        return tagged, "CUDA code in its libraries, the CUDA version from build-version"
    if len(majors) == 1:
        return None, f"CUDA {next(iter(majors))}.x code (libcudart.so.{next(iter(majors))})"
    return None, "CUDA code in its libraries, version unknown"
