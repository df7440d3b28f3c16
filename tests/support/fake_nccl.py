"""The fake NCCL source tree (tests/fixtures/fake-nccl) with the libraries its fake
compiler hands out, made by fdl.binaries.synthetic."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin

__all__ = ["FAKE_NCCL", "fake_libnccl", "fake_nccl_tree"]

FAKE_NCCL = Path(__file__).resolve().parent.parent / "fixtures" / "fake-nccl"


def fake_libnccl(codes: Sequence[str]) -> bytes:
    """A libnccl.so.2 whose fatbin holds ``codes`` (``sm_61``, ``compute_120``)."""
    entries = []
    for code in codes:
        kind, number = code.split("_")
        entries.append(FakeEntry("ptx" if kind == "compute" else "cubin", int(number)))
    return build_elf(
        {".text": b"\x90" * 16, ".nv_fatbin": build_fatbin([entries])}, soname="libnccl.so.2"
    )


def fake_nccl_tree(dest: Path, prebuilt: Mapping[str, Sequence[str]]) -> Path:
    """A copy of the fake tree at ``dest`` whose compiler answers NVCC_GENCODE ``key``
    (``sm_61-sm_120``) with a library holding ``prebuilt[key]``."""
    shutil.copytree(FAKE_NCCL, dest)
    for key, codes in prebuilt.items():
        (dest / "prebuilt" / key).mkdir(parents=True)
        (dest / "prebuilt" / key / "libnccl.so.2").write_bytes(fake_libnccl(codes))
    return dest
