"""A full disk and SIGTERM end in documented exit codes (4 and 143), never 70.

The disk is a real 1 MiB tmpfs mounted for the test (the suite runs as root; without the
right to mount, the disk cases skip and say why, unless FDL_REQUIRE_DOCKER=1 says CI must run
everything).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.libtorch import variants
from fdl.locking import FileLock
from fdl.paths import Context
from tests.conftest import REPO, run_fdl_process
from tests.support.libtorch_trees import make_tree

NAME = ("--name", "x")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        if os.environ.get("FDL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> None:
    """Fill the file system of ``directory`` to the last byte."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_install_from_dir_on_a_full_disk_exits_4_and_leaves_nothing(
    small_disk: Path, tmp_path: Path
) -> None:
    tree = make_tree(tmp_path / "tree", "2.13.0+cpu")
    (tree / "lib" / "big.so").write_bytes(os.urandom(2 << 20))  # more than the disk holds
    home = small_disk / "home"
    for flags in ([], ["--force"]):
        result = run_fdl_process(
            ["libtorch", "install", "--from-dir", str(tree), "--name", "x", *flags],
            cwd=tmp_path,
            env={"FDL_HOME": str(home)},
        )
        assert result.exit_code == 4, result.output
        assert "No space left on device" in result.stderr and "fix:" in result.stderr
        left = sorted(p.name for p in (home / "libtorch" / "precompiled").iterdir())
        assert left == [], f"half-installed: {left}"


def test_activate_on_a_full_disk_exits_4_and_keeps_the_pointer(
    small_disk: Path, tmp_path: Path
) -> None:
    home = small_disk / "home"
    for name in ("a", "b"):
        make_tree(home / "libtorch" / "precompiled" / name, "2.13.0+cpu")
    context = Context(home, project=False)
    variants.activate(context, "precompiled/a")
    fill(small_disk)
    result = run_fdl_process(
        ["libtorch", "activate", "precompiled/b"], cwd=tmp_path, env={"FDL_HOME": str(home)}
    )
    assert result.exit_code == 4, result.output
    assert "No space left on device" in result.stderr
    assert (home / "libtorch" / ".active").read_text() == "precompiled/a\n"


def test_sigterm_while_waiting_for_a_lock_exits_143(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = make_tree(tmp_path / "tree", "2.13.0+cpu")
    lock = variants.lock_file(Context(home, project=False), "precompiled/x")
    environ = {**os.environ, "FDL_HOME": str(home), "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    with FileLock(lock, purpose="holding it for the test"):
        child = subprocess.Popen(
            [sys.executable, "-m", "fdl", "libtorch", "install", "--from-dir", str(tree), *NAME],
            cwd=tmp_path,
            env=environ,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(child.stderr or ()), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not any("holding it for the test" in line for line in lines):
            assert time.monotonic() < deadline, f"fdl never said whom it waits for: {lines}"
            assert child.poll() is None, f"fdl ended before the signal: {lines}"
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=60)
        reader.join(timeout=10)
    assert child.returncode == 143, lines
    assert any("terminated" in line for line in lines), lines
    assert not (home / "libtorch" / "precompiled" / "x").exists()
