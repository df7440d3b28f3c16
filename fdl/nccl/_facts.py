"""What the NCCL build plan is made from: the NCCL version inside ``libtorch_cuda.so`` and
the NVIDIA GPUs of this machine. Reads only; bounded."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from fdl.compat.archs import Capability

__all__ = ["SCAN_LIMIT", "gpu_capabilities", "scan_nccl_version"]

# NCCL's own banner, as NCCL prints it at init: ``NCCL version 2.27.5+cuda12.8``. The ``+``
# tells it from PyTorch's messages that name a version floor (``NCCL version 2.27.0 or
# later``) -- floDl's rule (flodl-cli 0.8.0 src/nccl/build.rs, detect_nccl_tag_...).
_BANNER = re.compile(rb"NCCL version (\d{1,3}\.\d{1,3}\.\d{1,4})\+")
_WORDS = b"NCCL version "
_CHUNK = 8 << 20
_OVERLAP = 64
# libtorch_cuda.so of torch 2.10 is about 1.1 GB; a file beyond this is not read to its end.
SCAN_LIMIT = 4 << 30


def scan_nccl_version(library: Path, *, limit: int = SCAN_LIMIT) -> str | None:
    """The NCCL version (``2.27.5``) whose banner ``library`` carries, or None.

    Reads in chunks (memory stays at a few MiB), at most ``limit`` bytes; a FIFO, a
    directory or an unreadable file is None, never a hang.
    """
    import os
    import stat

    try:
        fd = os.open(library, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    # one buffer, read into again and again: no new 8 MiB object (and its page faults) per chunk
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        tail = b""
        read = 0
        while read < limit:
            size = handle.readinto(view[: min(_CHUNK, limit - read)])
            if not size:
                return None
            read += size
            chunk = view[:size]
            # a banner across the chunk boundary, then within the chunk
            found = _search(tail + bytes(chunk[:_OVERLAP])) or _search(buffer, size)
            if found is not None:
                return found
            tail = bytes(chunk[-_OVERLAP:])
    return None


def _search(window: bytes | bytearray, end: int | None = None) -> str | None:
    # find runs at memory speed; the regex only where the words are
    stop = len(window) if end is None else end
    start = window.find(_WORDS, 0, stop)
    while start != -1:
        found = _BANNER.match(window, start, stop)
        if found:
            return found.group(1).decode()
        start = window.find(_WORDS, start + 1, stop)
    return None


def gpu_capabilities(archs: Iterable[str]) -> list[Capability]:
    """The distinct NVIDIA capabilities of GPUs given as ``sm_61`` arch names, sorted."""
    found: set[Capability] = set()
    for arch in archs:
        match = re.fullmatch(r"sm_(\d+)(\d)", arch)
        if match:
            found.add(Capability(int(match.group(1)), int(match.group(2))))
    return sorted(found, key=lambda c: (c.major, c.minor))
