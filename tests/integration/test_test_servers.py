"""The servers the test setup starts listen on 127.0.0.1 only and stop by themselves
(scripts/setup-slurm.sh, scripts/setup-registry.sh, scripts/server-watchdog.sh)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WATCHDOG = REPO / "scripts" / "server-watchdog.sh"


def _listeners() -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket, from /proc/net/tcp{,6}."""
    found = []
    for name in ("tcp", "tcp6"):
        path = Path(f"/proc/net/{name}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            address, port = fields[1].split(":")
            found.append((address, int(port, 16)))
    return found


def _wildcard(address: str) -> bool:
    return set(address) == {"0"}  # 00000000 (IPv4) or 32 zeros (IPv6)


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="no SLURM here")
def test_slurm_listens_on_loopback_only() -> None:
    up = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    if "UP" not in up.stdout:
        pytest.skip("the local SLURM cluster is not running (scripts/setup-slurm.sh)")
    ports = {6817, 6818}
    listening = [(a, p) for a, p in _listeners() if p in ports]
    assert {p for _, p in listening} == ports, listening
    assert not [entry for entry in listening if _wildcard(entry[0])], listening


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.skipif(os.geteuid() != 0, reason="the watchdog keeps its state in /run")
def test_the_watchdog_stops_servers_once_their_test_runs_end(tmp_path: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first = subprocess.Popen(["sleep", "300"])  # two test runs use the server
    second = subprocess.Popen(["sleep", "300"])
    name = f"test-{uuid.uuid4().hex[:8]}"
    stop = f"kill {server.pid}"
    try:
        for owner in (first, second):
            env = {
                **os.environ,
                "FDL_SERVERS_OWNER": str(owner.pid),
                "FDL_SERVER_CHECK_SECONDS": "1",
            }
            subprocess.run(["bash", str(WATCHDOG), name, stop], env=env, check=True, timeout=30)
        first.kill()
        first.wait()
        time.sleep(3)  # three checks: the second run still uses it
        assert server.poll() is None
        second.kill()
        second.wait()
        server.wait(timeout=30)  # stopped by the watchdog, not by this test
        assert not Path(f"/run/fdl-servers/{name}").exists()
    finally:
        for process in (server, first, second):
            if process.poll() is None:
                process.kill()
