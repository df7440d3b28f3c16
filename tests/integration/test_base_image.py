"""scripts/make-base-image.sh (the set-up's base image) makes a good image when debootstrap
leaves /proc mounted and held inside the root, and leaves nothing mounted or behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import docker_required

REPO = Path(__file__).resolve().parents[2]
MAKE = REPO / "scripts" / "make-base-image.sh"

# Builds a tiny root (a static busybox), then does what debootstrap did on some runs: leaves
# /proc mounted and busy (a process whose cwd is inside), and a tmpfs stacked on /dev with
# another under it. FAKE_FAIL=1 then fails, as a broken mirror would; FAKE_HANG=1 waits (to
# be interrupted).
FAKE_DEBOOTSTRAP = r"""#!/usr/bin/env bash
set -eu
root="$3"
mkdir -p "$root/bin" "$root/proc" "$root/dev" "$root/etc" "$root/var/lib/apt/lists"
cp "$BUSYBOX" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
echo "fdl test root" >"$root/etc/motd"
echo stale >"$root/var/lib/apt/lists/list"
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/dev"
mkdir "$root/dev/pts"
mount -t tmpfs tmpfs "$root/dev/pts"
echo "not of the root" >"$root/dev/pts/0"
# The holder names itself once it is in a session of its own: a stop signal sent to this
# script's group after the name is there can no longer reach it.
setsid bash -c 'cd "$1/proc/self" && echo $$ >"$HOLDER_PID.partial" && mv "$HOLDER_PID.partial" "$HOLDER_PID" && exec sleep 600' holder "$root" </dev/null >/dev/null 2>&1 &
while [ ! -e "$HOLDER_PID" ]; do sleep 0.05; done
[ "${FAKE_HANG:-0}" = 0 ] || sleep 600
echo "I: Base system installed successfully."
[ "${FAKE_FAIL:-0}" = 0 ] || { echo "E: Couldn't download packages" >&2; exit 1; }
"""


def _mounts() -> list[str]:
    """Every mount point (mountinfo's fifth field, escapes decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        points.append(point.encode().decode("unicode_escape"))
    return points


@pytest.fixture
def setting(tmp_path: Path):
    """The fake debootstrap, an empty TMPDIR for the script, and the holder ended after."""
    problem = None
    if os.geteuid() != 0:
        problem = "mounting inside the root needs root (the set-up runs as root)"
    elif shutil.which("busybox") is None:
        problem = "no busybox (bash scripts/setup-machine.sh installs busybox-static)"
    if problem is not None:
        if docker_required():
            pytest.fail(f"FDL_REQUIRE_DOCKER=1 but {problem}", pytrace=False)
        pytest.skip(problem)
    fake = tmp_path / "debootstrap"
    fake.write_text(FAKE_DEBOOTSTRAP)
    fake.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    holder = tmp_path / "holder.pid"
    image = f"fdl-made/base-{uuid.uuid4().hex[:12]}:test"
    env = {
        **os.environ,
        "FDL_DEBOOTSTRAP": str(fake),
        "TMPDIR": str(temp),
        "BUSYBOX": shutil.which("busybox") or "",
        "HOLDER_PID": str(holder),
    }
    yield env, temp, holder, image
    if holder.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(holder.read_text()), signal.SIGKILL)
    subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True, check=False)


def _make(env: dict[str, str], image: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MAKE), image, "bookworm", "http://127.0.0.1:9/debian"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _holder_alive(holder: Path) -> bool:
    return Path(f"/proc/{int(holder.read_text())}").exists()


@pytest.mark.docker
def test_proc_left_mounted_and_held_still_makes_a_good_image(setting, tmp_path: Path):
    env, temp, holder, image = setting
    made = _make(env, image)
    assert made.returncode == 0, made.stderr
    assert f"imported {image}" in made.stderr
    assert _holder_alive(holder), "the fault was not injected: nothing held /proc"

    ran = subprocess.run(
        ["docker", "run", "--rm", image, "/bin/busybox", "cat", "/etc/motd"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (ran.returncode, ran.stdout) == (0, "fdl test root\n"), ran.stderr

    # The image's only layer is what tar archived: docker export of a container made from it
    # adds nothing under proc/ or dev/pts/ (docker mounts those at run time).
    container = subprocess.run(
        ["docker", "create", image], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        exported = tmp_path / "export.tar"
        with exported.open("wb") as out:
            subprocess.run(["docker", "export", container], stdout=out, check=True, timeout=120)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    with tarfile.open(exported) as archive:
        names = {m.name.rstrip("/").removeprefix("./") for m in archive.getmembers()}
    assert {"bin/busybox", "etc/motd", "proc"} <= names
    assert not [n for n in names if n.startswith(("proc/", "dev/pts/"))]
    assert "var/lib/apt/lists/list" not in names

    assert not [p for p in _mounts() if p.startswith(str(temp))]
    assert list(temp.iterdir()) == []


@pytest.mark.docker
def test_a_failed_debootstrap_leaves_nothing_mounted_or_behind(setting):
    env, temp, holder, image = setting
    made = _make({**env, "FAKE_FAIL": "1"}, image)
    assert made.returncode == 1
    assert "E: Couldn't download packages" in made.stderr
    assert "debootstrap failed" in made.stderr
    assert _holder_alive(holder)
    assert not [p for p in _mounts() if p.startswith(str(temp))]
    assert list(temp.iterdir()) == []
    inspected = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    assert inspected.returncode != 0


@pytest.mark.docker
def test_interrupted_while_debootstrapping_leaves_nothing_mounted_or_behind(setting):
    env, temp, holder, image = setting
    # Ctrl-C or a CI runner's stop signals the whole process group.
    proc = subprocess.Popen(
        [str(MAKE), image, "bookworm", "http://127.0.0.1:9/debian"],
        env={**env, "FAKE_HANG": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not holder.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holder.exists(), proc.communicate()[1]
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert _holder_alive(holder)
    assert not [p for p in _mounts() if p.startswith(str(temp))]
    assert list(temp.iterdir()) == []
