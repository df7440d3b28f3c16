"""The archs and PTX of a real torch wheel on PyPI, streamed (``python -m fdl.refresh
wheels``): about 360 MB read through HTTP Range requests, nothing kept on disk."""

from __future__ import annotations

import json

import pytest

from fdl.net import read_range
from fdl.refresh._wheel_code import wheel_code_report
from fdl.refresh._wheels import PYPI_JSON, pypi_wheels

pytestmark = [pytest.mark.slow, pytest.mark.network]


def test_torch_2141_pypi_wheel_has_the_tabled_cubins_and_no_ptx() -> None:
    raw, _ = read_range(PYPI_JSON, 0, None)
    url = pypi_wheels(json.loads(raw), "2.14.1")["linux-x86_64"]
    report, drift = wheel_code_report("2.14.1", "linux-x86_64", url)
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
    report, drift = wheel_code_report("2.8.0", "linux-x86_64", url)
    assert report["compression"] == ["lz4"]
    assert report["cubins"] == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert report["ptx"] == []
    assert drift == [], drift
