"""The archs and PTX of a real torch wheel on PyPI, streamed (``python -m fdl.refresh
wheels``): about 360 MB read through HTTP Range requests. The tool keeps nothing on disk;
the tests keep each range they read in the tests' cache, so a second run reads none."""

from __future__ import annotations

import hashlib
import json

import pytest

from fdl.net import read_range
from fdl.refresh._wheel_code import wheel_code_report
from fdl.refresh._wheels import PYPI_JSON, pypi_wheels
from tests.support.artefacts import cache_dir

pytestmark = [pytest.mark.slow, pytest.mark.network]


def cached_read(url: str, start: int, length: int | None) -> tuple[bytes, int]:
    """``read_range``, with each answer kept in the tests' cache (a wheel on PyPI never
    changes under its URL)."""
    key = hashlib.sha256(f"{url}\n{start}\n{length}".encode()).hexdigest()
    folder = cache_dir() / "ranges"
    data, total = folder / f"{key}.bin", folder / f"{key}.total"
    if data.is_file() and total.is_file():
        return data.read_bytes(), int(total.read_text())
    body, size = read_range(url, start, length)
    folder.mkdir(parents=True, exist_ok=True)
    partial = data.with_suffix(".part")
    partial.write_bytes(body)
    total.write_text(str(size))
    partial.replace(data)
    return body, size


def test_torch_2141_pypi_wheel_has_the_tabled_cubins_and_no_ptx() -> None:
    raw, _ = read_range(PYPI_JSON, 0, None)
    url = pypi_wheels(json.loads(raw), "2.14.1")["linux-x86_64"]
    report, drift = wheel_code_report("2.14.1", "linux-x86_64", url, cached_read)
    assert report["cubins"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert report["ptx"] == []
    assert drift == [], drift
    assert report["compression"] == ["zstd"]
    counts = report["counts"]
    assert isinstance(counts, dict) and counts["sm_120"] == counts["sm_75"] > 400
    assert isinstance(report["bytes_read"], int) and report["bytes_read"] < 400_000_000


def test_torch_280_cu128_wheel_is_lz4_compressed() -> None:
    """Builds with CUDA 12.x's ``-compress-all`` flag their entries 0x2000 (LZ4), which
    cuobjdump calls compressed; fdl read them as uncompressed before."""
    raw, _ = read_range(PYPI_JSON, 0, None)
    url = pypi_wheels(json.loads(raw), "2.8.0")["linux-x86_64"]
    report, drift = wheel_code_report("2.8.0", "linux-x86_64", url, cached_read)
    assert report["compression"] == ["lz4"]
    assert report["cubins"] == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert report["ptx"] == []
    assert drift == [], drift
