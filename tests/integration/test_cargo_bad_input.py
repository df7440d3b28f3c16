"""Real cargo builds through `fdl build` that go wrong: a crate that does not compile, a
crates.io that does not answer, a build interrupted with Ctrl-C. Each ends with cargo's
status and fdl's note, never a traceback or exit 70, and Ctrl-C leaves no process.

Cost: small local crates (no dependency is downloaded), about 20 s on 2 cores. The
cargo-free checks (no cargo, an old rustc) are `tests/cli/test_cargo_preflight.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import REPO, run_fdl_process
from tests.support.cargo import require_cargo

TOKEN = "FDL_TEST_CARGO_TOKEN"


def _crate(root: Path, *, main: str = "fn main() {}\n", deps: str = "", build_rs: str = "") -> Path:
    root.mkdir()
    (root / "Cargo.toml").write_text(
        '[package]\nname = "model"\nversion = "0.1.0"\nedition = "2021"\n'
        f'rust-version = "1.70"\n\n[dependencies]\n{deps}'
    )
    (root / "src").mkdir()
    (root / "src" / "main.rs").write_text(main)
    if build_rs:
        (root / "build.rs").write_text(build_rs)
    (root / "fdl.yml").write_text("commands:\n  build: {run: cargo build}\n")
    return root


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    cargo = Path(require_cargo()).parent
    return {
        "PATH": f"{cargo}{os.pathsep}{os.environ.get('PATH', '')}",
        "CARGO_TARGET_DIR": str(tmp_path / "target"),
        "CARGO_TERM_COLOR": "never",
        **more,
    }


def test_a_crate_that_does_not_compile(tmp_path: Path) -> None:
    project = _crate(tmp_path / "model", main='fn main() { let x: u32 = "no"; }\n')
    result = run_fdl_process(["build"], cwd=project, env=_env(tmp_path), timeout=300)
    assert result.exit_code == 101, result.output
    assert "error[E0308]: mismatched types" in result.stderr  # cargo's own, passed through
    assert "`fdl build` failed: cargo exited with status 101" in result.stderr
    assert "Traceback" not in result.output


def test_a_registry_that_does_not_answer(tmp_path: Path) -> None:
    """crates.io replaced by a sparse index on a closed port (cargo fails at once)."""
    home = tmp_path / "cargo-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[source.crates-io]\nreplace-with = "dead"\n\n'
        '[source.dead]\nregistry = "sparse+http://127.0.0.1:9/index/"\n'
    )
    project = _crate(tmp_path / "model", deps='itoa = "1"\n')
    env = _env(tmp_path, CARGO_HOME=str(home), CARGO_NET_RETRY="0")
    result = run_fdl_process(["build"], cwd=project, env=env, timeout=300)
    assert result.exit_code == 101, result.output
    assert "127.0.0.1" in result.stderr  # cargo names the registry that failed
    assert "`fdl build` failed: cargo exited with status 101" in result.stderr
    assert "crates.io did not answer" in result.stderr and "config.toml" in result.stderr
    assert "Traceback" not in result.output


def _ours(token: str) -> list[tuple[int, str]]:
    """Processes whose environment holds ``token``: what fdl started, at any depth."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if f"{TOKEN}={token}".encode() in environ.split(b"\0"):
            found.append((int(entry.name), command))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.usefixtures("busy_cores")
def test_ctrl_c_during_a_build_leaves_no_process(tmp_path: Path) -> None:
    """SIGINT to fdl's process group while a build script runs (as Ctrl-C in a shell
    without job control, or a CI runner's cancel): fdl forwards it to cargo's group."""
    build_rs = (
        'fn main() {\n    std::process::Command::new("sleep").arg("600").status().unwrap();\n}\n'
    )
    project = _crate(tmp_path / "model", build_rs=build_rs)
    token = uuid.uuid4().hex
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FDL_")}
    environ.update(_env(tmp_path), PYTHONPATH=str(REPO), NO_COLOR="1", **{TOKEN: token})
    fdl = subprocess.Popen(
        [sys.executable, "-m", "fdl", "build"],
        cwd=project,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a shell gives a job
    )
    try:
        deadline = time.monotonic() + 240
        while not any("sleep 600" in command for _, command in _ours(token)):
            assert fdl.poll() is None, fdl.communicate()
            assert time.monotonic() < deadline, _ours(token)
            time.sleep(0.2)
        os.killpg(fdl.pid, signal.SIGINT)
        _, err = fdl.communicate(timeout=60)
        assert fdl.returncode == 130, err
        assert b"Traceback" not in err
        assert _ours(token) == []  # the instant fdl is gone: it waits for cargo's group
    finally:
        for pid, _ in _ours(token):
            os.kill(pid, signal.SIGKILL)
        if fdl.poll() is None:
            fdl.kill()
