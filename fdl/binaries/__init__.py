"""Reading compiled binaries without the tools that made them.

- :mod:`fdl.binaries.elf`: ELF64 headers, sections, DT_NEEDED/RPATH/RUNPATH/SONAME.
- :mod:`fdl.binaries.fatbin`: the CUDA archs a library contains (``.nv_fatbin``).
- :mod:`fdl.binaries.fatbin_stream`: the same, from a stream of the library's bytes (a
  member of a remote wheel) in bounded memory.
- :mod:`fdl.binaries.offload`: the AMD gfx targets a HIP library contains (``.hip_fatbin``
  clang offload bundles, compressed or not).
- :mod:`fdl.binaries.closure`: the libraries a program loads, resolved like ``ld.so``.

Pure Python (mmap + struct): no CUDA toolkit, no cuobjdump, no readelf needed.
"""

from __future__ import annotations

from fdl.binaries.closure import SYSTEM_DIRS, Closure, dependency_closure, ld_so_conf_dirs
from fdl.binaries.elf import (
    BinaryFormatError,
    DynamicInfo,
    ElfFile,
    Section,
    elf_machine,
    is_elf,
    needed,
    read_dynamic,
    rpath,
    runpath,
    soname,
)
from fdl.binaries.fatbin import DeviceCode, FatbinEntry, parse_fatbin, read_device_code
from fdl.binaries.fatbin_stream import FatbinScanner, scan_device_code
from fdl.binaries.offload import OffloadCode, OffloadEntry, read_offload_code

__all__ = [
    "SYSTEM_DIRS",
    "BinaryFormatError",
    "Closure",
    "DeviceCode",
    "DynamicInfo",
    "ElfFile",
    "FatbinEntry",
    "FatbinScanner",
    "OffloadCode",
    "OffloadEntry",
    "Section",
    "dependency_closure",
    "elf_machine",
    "is_elf",
    "ld_so_conf_dirs",
    "needed",
    "parse_fatbin",
    "read_device_code",
    "read_dynamic",
    "read_offload_code",
    "rpath",
    "runpath",
    "scan_device_code",
    "soname",
]
