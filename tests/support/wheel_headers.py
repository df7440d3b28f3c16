"""libtorch's headers out of a remote torch wheel, read with HTTP Range requests (its zip
directory, then the one span that holds ``torch/include/``)."""

from __future__ import annotations

import json
import struct
import time
import urllib.request
import zlib
from pathlib import Path
from urllib.parse import urljoin

from tests.support import downloads

PYPI_JSON = "https://pypi.org/pypi/torch/json"
INCLUDE = "torch/include/"


def pypi_wheel_url(version: str, suffix: str = "manylinux_2_28_aarch64.whl") -> str:
    """The URL of torch ``version``'s cp311 wheel ending in ``suffix`` (the Linux aarch64
    wheel is the small CPU build; its headers are the x86_64 ones).

    Raises:
        OSError: PyPI cannot be reached. LookupError: no such wheel.
    """
    started = time.monotonic()
    with urllib.request.urlopen(PYPI_JSON, timeout=60) as response:
        body = response.read(64 << 20)  # torch's project JSON: a few MB
    downloads.note("torch's project JSON", PYPI_JSON, len(body), time.monotonic() - started)
    project = json.loads(body)
    for item in project["releases"].get(version, []):
        name = str(item["filename"])
        if "-cp311-" in name and name.endswith(suffix):
            return urljoin(PYPI_JSON, str(item["url"]))
    raise LookupError(f"torch {version} has no cp311 wheel ending in {suffix}")


def extract_remote(url: str, dest: Path) -> Path:
    """``dest/include`` from a remote wheel, in one ranged read of the include span."""
    from fdl.net import read_range
    from fdl.refresh._wheel_code import zip_members

    members = [
        m
        for m in zip_members(url, read_range).values()
        if m.name.startswith(INCLUDE) and not m.name.endswith("/")
    ]
    low = min(m.local_offset for m in members)
    high = max(m.local_offset + 30 + len(m.name.encode()) + 512 + m.compressed for m in members)
    started = time.monotonic()
    data, _ = read_range(url, low, high - low)
    name = url.rsplit("/", 1)[-1]
    downloads.note(f"{name}: torch/include/", url, len(data), time.monotonic() - started)
    for member in members:
        at = member.local_offset - low
        name_len, extra_len = struct.unpack_from("<HH", data, at + 26)
        start = at + 30 + name_len + extra_len
        body = data[start : start + member.compressed]
        content = zlib.decompress(body, -15) if member.method == 8 else body
        target = dest / member.name.removeprefix("torch/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return dest
