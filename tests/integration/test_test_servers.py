"""The servers the test setup starts listen on 127.0.0.1 only and stop by themselves
(scripts/setup-slurm.sh, scripts/setup-registry.sh, scripts/server-watchdog.sh)."""

from __future__ import annotations

import contextlib
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
SETUP_REGISTRY = REPO / "scripts" / "setup-registry.sh"


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


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir() if fd_dir.exists() else ():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _listeners_of(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of the listening TCP sockets the processes hold."""
    inodes = set().union(*(_socket_inodes(pid) for pid in pids)) if pids else set()
    found = []
    for name in ("tcp", "tcp6"):
        path = Path(f"/proc/net/{name}")
        for line in path.read_text().splitlines()[1:] if path.exists() else ():
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                address, port = fields[1].split(":")
                found.append((address, int(port, 16)))
    return found


def _children(pid: int) -> set[int]:
    """The process and its descendants (from /proc/*/stat)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found = {pid}
    grew = True
    while grew:
        more = {child for child, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="no SLURM here")
def test_slurm_listens_on_loopback_only() -> None:
    up = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    if "UP" not in up.stdout:
        pytest.skip("the local SLURM cluster is not running (scripts/setup-slurm.sh)")
    ports = {6817, 6818}
    listening = [(a, p) for a, p in _listeners() if p in ports]
    assert {p for _, p in listening} == ports, listening
    assert not [entry for entry in listening if _wildcard(entry[0])], listening


@pytest.mark.skipif(shutil.which("srun") is None, reason="no SLURM here")
def test_srun_of_a_running_job_listens_on_loopback_only() -> None:
    # srun opens its own ports (I/O and step messages) while a job step runs; with
    # NoInAddrAny they are bound to the node's address, not to every interface.
    up = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    if "UP" not in up.stdout:
        pytest.skip("the local SLURM cluster is not running (scripts/setup-slurm.sh)")
    name = f"fdl-listen-{uuid.uuid4().hex[:8]}"
    step = subprocess.Popen(
        ["srun", f"--job-name={name}", "-n1", "sleep", "120"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        listening: list[tuple[str, int]] = []
        for _ in range(600):  # until the step runs (srun listens before it launches)
            running = subprocess.run(
                ["squeue", "-h", "-n", name, "-t", "RUNNING", "-o", "%i"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            listening = _listeners_of(_children(step.pid))
            if running and listening:
                break
            if step.poll() is not None:
                pytest.fail(f"srun ended early ({step.returncode})")
            time.sleep(0.1)
        assert listening, "srun never listened while its step ran"
        assert not [entry for entry in listening if _wildcard(entry[0])], listening
    finally:
        subprocess.run(["scancel", "-n", name], check=False)
        step.kill()
        step.wait()


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
        state = Path(f"/run/fdl-servers/{name}")
        deadline = time.monotonic() + 30  # the watchdog removes it just after the stop
        while state.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not state.exists()
    finally:
        for process in (server, first, second):
            if process.poll() is None:
                process.kill()
        Path(f"/run/fdl-servers/{name}.lock").unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the watchdog keeps its state in /run")
def test_a_new_watchdog_forgets_the_owners_of_one_that_is_gone(tmp_path: Path) -> None:
    """Set-up run by hand after a watchdog was killed: the owners it left (dead test runs)
    must not make the new watchdog stop the servers just started (it stopped SLURM 10 s
    after `setup-machine.sh` once)."""
    server = subprocess.Popen(["sleep", "300"])
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that has been and is gone
    name = f"test-{uuid.uuid4().hex[:8]}"
    state = Path(f"/run/fdl-servers/{name}")
    state.mkdir(parents=True)
    (state / "owners").write_text(f"{gone.pid}\n")
    (state / "watchdog.pid").write_text(f"{gone.pid}\n")
    env = {**os.environ, "FDL_SERVERS_OWNER": "", "FDL_SERVER_CHECK_SECONDS": "1"}
    try:
        subprocess.run(
            ["bash", str(WATCHDOG), name, f"kill {server.pid}"], env=env, check=True, timeout=30
        )
        watchdog = int((state / "watchdog.pid").read_text())
        assert watchdog != gone.pid and Path(f"/proc/{watchdog}").exists()
        assert (state / "owners").read_text().split() == []
        time.sleep(3)  # three checks
        assert server.poll() is None, "the new watchdog stopped the server for a dead owner"
    finally:
        if (state / "watchdog.pid").exists():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((state / "watchdog.pid").read_text()), 9)
        server.kill()
        server.wait()
        shutil.rmtree(state, ignore_errors=True)
        Path(f"/run/fdl-servers/{name}.lock").unlink(missing_ok=True)


def _start_registry(port: int, env: dict[str, str]) -> int:
    """Runs scripts/setup-registry.sh for 127.0.0.1:PORT; the PID it recorded."""
    full = {**os.environ, "FDL_TEST_REGISTRY": f"127.0.0.1:{port}", **env}
    subprocess.run(["bash", str(SETUP_REGISTRY)], env=full, check=True, timeout=60)
    return int(Path(f"/run/fdl-registry-{port}.pid").read_text())


def _wait_gone(pid: int) -> bool:
    for _ in range(600):
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return True
        time.sleep(0.1)
    return False


def _wait_closed(port: int) -> bool:
    """The port stops listening (the kernel closes it as the process is torn down)."""
    for _ in range(600):
        if not [entry for entry in _listeners() if entry[1] == port]:
            return True
        time.sleep(0.1)
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _cleanup_registry(port: int) -> None:
    """Stops this test's registry (whatever the watchdog did) and removes its files."""
    config = f"/etc/fdl/registry-{port}.yml".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if config in cmdline.read_bytes().split(b"\0"):
                os.kill(int(cmdline.parent.name), 9)
        except OSError:
            continue
    Path(f"/run/fdl-registry-{port}.pid").unlink(missing_ok=True)
    watchdog = Path(f"/run/fdl-servers/registry-{port}/watchdog.pid")
    if watchdog.exists():
        os.kill(int(watchdog.read_text()), 9)
    shutil.rmtree(f"/run/fdl-servers/registry-{port}", ignore_errors=True)
    Path(f"/run/fdl-servers/registry-{port}.lock").unlink(missing_ok=True)
    Path(f"/etc/fdl/registry-{port}.yml").unlink(missing_ok=True)
    Path(f"/var/log/fdl-registry-{port}.log").unlink(missing_ok=True)
    shutil.rmtree(f"/var/lib/fdl-registry-{port}", ignore_errors=True)


_REGISTRY = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("docker-registry") is None,
    reason="needs root and Debian's docker-registry (scripts/setup-registry.sh)",
)


@_REGISTRY
def test_the_registry_listens_on_loopback_and_stops_when_its_test_run_ends() -> None:
    port = _free_port()
    owner = subprocess.Popen(["sleep", "300"])  # the test run that asked for it
    try:
        pid = _start_registry(
            port, {"FDL_SERVERS_OWNER": str(owner.pid), "FDL_SERVER_CHECK_SECONDS": "1"}
        )
        listening = _listeners_of({pid})
        assert [p for _, p in listening] == [port], listening
        assert not [entry for entry in listening if _wildcard(entry[0])], listening
        owner.kill()
        owner.wait()
        assert _wait_gone(pid), "the registry outlived the test run that started it"
        assert _wait_closed(port), "the registry's port is still listening"
    finally:
        if owner.poll() is None:
            owner.kill()
        _cleanup_registry(port)


@_REGISTRY
def test_a_registry_started_by_hand_stops_after_its_maximum_lifetime() -> None:
    # No test run registered (the setup run by hand): only the lifetime limit applies.
    port = _free_port()
    env = {"FDL_SERVERS_OWNER": "", "FDL_SERVER_CHECK_SECONDS": "1", "FDL_SERVER_MAX_SECONDS": "2"}
    try:
        pid = _start_registry(port, env)
        assert _wait_gone(pid), "the registry outlived its maximum lifetime"
    finally:
        _cleanup_registry(port)


def test_the_registry_setup_refuses_an_address_off_loopback() -> None:
    env = {**os.environ, "FDL_TEST_REGISTRY": "0.0.0.0:5999"}
    done = subprocess.run(
        ["bash", str(SETUP_REGISTRY)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "loopback only" in done.stderr
