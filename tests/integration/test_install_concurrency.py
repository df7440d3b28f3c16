"""Several processes installing the same variant: the lock keeps the result whole."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from fdl import archive
from fdl.locking import FileLock, LockBusy
from tests.support import faulty_http
from tests.support.faulty_http import Trickle

faulty_server = faulty_http.faulty_server  # the fixture

REPO = Path(__file__).resolve().parents[2]


def libtorch_zip(files: int = 40, size: int = 50_000) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("libtorch/build-version", "2.8.0+cpu\n")
        for index in range(files):
            out.writestr(f"libtorch/lib/lib{index}.so", os.urandom(size))
    return buffer.getvalue()


ZIP = libtorch_zip()
SHA = hashlib.sha256(ZIP).hexdigest()

INSTALL = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from fdl.archive import remove_stale_staging, safe_extract_zip, test_zip
    from fdl.locking import FileLock
    from fdl.net import download

    url, cache, target, sha = sys.argv[1:5]
    target = Path(target)
    with FileLock(target.with_name(target.name + ".lock"), timeout=120, purpose="installing cpu"):
        remove_stale_staging(target)
        if (target / "build-version").is_file():
            print("already installed")
            raise SystemExit(0)
        result = download(url, Path(cache) / "libtorch-cpu.zip", sha256=sha)
        test_zip(result.path)
        safe_extract_zip(result.path, target, strip_prefix="libtorch")
        print(f"installed after fetching {result.bytes_transferred} bytes")
    """
)


def python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def expected_tree() -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(ZIP)) as zf:
        return {
            info.filename.removeprefix("libtorch/"): zf.read(info)
            for info in zf.infolist()
            if not info.is_dir()
        }


def actual_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_concurrent_installs_give_one_whole_variant(faulty_server, tmp_path):
    url = faulty_server.add("/libtorch-cpu.zip", ZIP)
    faulty_server.always("/libtorch-cpu.zip", Trickle(chunk=64_000, delay=0.01))
    target = tmp_path / "libtorch/precompiled/cpu"
    cache = tmp_path / "cache"
    procs = [python(INSTALL, url, str(cache), str(target), SHA) for _ in range(3)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    lines = sorted(out.strip() for out, _ in outputs)
    assert lines[:2] == ["already installed", "already installed"]
    assert lines[2].startswith("installed after fetching")
    assert actual_tree(target) == expected_tree()
    assert sorted(p.name for p in target.parent.iterdir()) == ["cpu", "cpu.lock"]
    assert faulty_server.sent("/libtorch-cpu.zip") == len(ZIP)  # downloaded once


DOWNLOAD = textwrap.dedent(
    """
    import sys
    from fdl.net import download
    result = download(sys.argv[1], sys.argv[2], sha256=sys.argv[3])
    print(result.bytes_transferred)
    """
)


def test_concurrent_downloads_of_one_file_share_the_work(faulty_server, tmp_path):
    url = faulty_server.add("/x.zip", ZIP)
    faulty_server.always("/x.zip", Trickle(chunk=64_000, delay=0.01))
    dest = tmp_path / "x.zip"
    procs = [python(DOWNLOAD, url, str(dest), SHA) for _ in range(2)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert sorted(int(out) for out, _ in outputs) == [0, len(ZIP)]
    assert dest.read_bytes() == ZIP


HOLD = textwrap.dedent(
    """
    import sys, time
    from fdl.locking import FileLock
    with FileLock(sys.argv[1], purpose="installing cu128"):
        print("locked", flush=True)
        time.sleep(60)
    """
)


def test_lock_held_by_another_process_is_named_and_freed_when_it_dies(tmp_path):
    lock_path = tmp_path / "cu128.lock"
    holder = python(HOLD, str(lock_path))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockBusy) as caught:
            FileLock(lock_path, timeout=0.3).acquire()
        assert f"process {holder.pid}" in str(caught.value)
        assert "installing cu128" in str(caught.value)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    # The kernel released the lock with the process: no stale lock to clean.
    with FileLock(lock_path, timeout=5) as lock:
        assert lock.held


SLOW_EXTRACT = textwrap.dedent(
    """
    import sys, time
    from fdl.archive import safe_extract_zip

    def progress(done, total):
        if done > total // 2:
            print("halfway", flush=True)
            time.sleep(60)

    safe_extract_zip(sys.argv[1], sys.argv[2], strip_prefix="libtorch", on_progress=progress)
    """
)


def test_killed_extraction_leaves_no_half_variant(tmp_path):
    zip_path = tmp_path / "lt.zip"
    zip_path.write_bytes(ZIP)
    target = tmp_path / "precompiled/cpu"
    proc = python(SLOW_EXTRACT, str(zip_path), str(target))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "halfway"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not target.exists()
    leftovers = list(target.parent.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".cpu.staging-")
    assert archive.remove_stale_staging(target) == leftovers
    archive.safe_extract_zip(zip_path, target, strip_prefix="libtorch")
    assert actual_tree(target) == expected_tree()


def test_server_module_serves_a_directory_from_another_process(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"hello")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.faulty_http", str(tmp_path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        from fdl.net import download

        download(f"http://127.0.0.1:{port}/a.bin", tmp_path / "out.bin")
        assert (tmp_path / "out.bin").read_bytes() == b"hello"
    finally:
        proc.communicate(input="", timeout=30)
