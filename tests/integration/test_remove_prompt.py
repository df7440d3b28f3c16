"""`fdl libtorch remove` in a terminal: it asks, and only "y" deletes (a real pty)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from fdl.libtorch import VariantInfo, finish_info, variants
from fdl.paths import Context
from tests.conftest import REPO
from tests.support.libtorch_trees import make_tree


def _install(home: Path, name: str) -> Path:
    context = Context(home, project=False)
    path = make_tree(context.libtorch_dir / name, "2.13.0+cpu", cubins=(), cuda_needed=())
    info = VariantInfo(name=name, torch="2.13.0", cuda=None, source={"kind": "download"})
    variants.write_info(path, finish_info(path, info))
    return path


def _answer(home: Path, cwd: Path, answer: bytes) -> tuple[int, str]:
    """Run `fdl libtorch remove cpu` with a terminal as stdin and stderr; answer the question."""
    master, slave = pty.openpty()
    env = {**os.environ, "FDL_HOME": str(home), "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fdl", "libtorch", "remove", "cpu"],
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        cwd=cwd,
        env=env,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"[y/N]" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                seen += os.read(master, 4096)
        assert b"[y/N]" in seen, seen
        os.write(master, answer)
        code = proc.wait(timeout=60)
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        assert proc.stdout is not None
        proc.stdout.close()
    return code, seen.decode(errors="replace")


def test_remove_asks_in_a_terminal_and_only_yes_deletes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    variant = _install(home, "precompiled/cpu")
    code, text = _answer(home, tmp_path, b"\n")
    assert code == 0 and "delete precompiled/cpu" in text and "nothing deleted" in text
    assert (variant / "lib").is_dir()
    code, text = _answer(home, tmp_path, b"y\n")
    assert code == 0 and "removed precompiled/cpu" in text
    assert not variant.exists()
