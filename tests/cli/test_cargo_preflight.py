"""What fdl checks before a project command starts cargo, and what it says when cargo fails:
no cargo on PATH, a rustc older than the crate's `rust-version` (rustup's, or one rustup
cannot help), a failing build passed through with a note. Recording fakes of cargo and
rustc on PATH (`tests/integration/test_flodl_real.py` builds for real)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.tasks._framework_env import build_tools
from fdl.tasks._preflight import rust_version

CARGO_TOML = (
    '[package]\nname = "model"\nversion = "0.1.0"\nedition = "2024"\nrust-version = "1.85"\n'
)


@pytest.mark.parametrize(
    ("script", "tools"),
    [
        ("cargo build", {"cargo"}),
        ("cargo run --release --", {"cargo"}),
        ("RUSTFLAGS=-g cargo test", {"cargo"}),
        ("cd sub && cargo check", {"cargo"}),
        ("cmake -B build && cmake --build build", {"cmake"}),
        ("echo cargo", set()),
        ("mycargo build", set()),
        ("python train.py", set()),
        ("set -e\nexec cargo clippy", {"cargo"}),
    ],
)
def test_the_build_tools_a_script_runs(script: str, tools: set[str]) -> None:
    assert build_tools(script) == tools


def test_rust_version_is_read_with_its_place(tmp_path: Path) -> None:
    (tmp_path / "Cargo.toml").write_text(CARGO_TOML)
    found = rust_version(tmp_path)
    assert found is not None
    version, where = found
    assert version == "1.85" and (where.line, where.column) == (5, 17)
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "model"\n')
    assert rust_version(tmp_path) is None


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    root.mkdir()
    (root / "Cargo.toml").write_text(CARGO_TOML)
    (root / "fdl.yml").write_text(
        "commands:\n  build: {run: cargo build}\n  lint: {run: echo linted}\n"
    )
    return root


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A PATH of its own: sh, and the fakes a test adds (the machine's cargo must not answer)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    os.symlink("/bin/sh", folder / "sh")
    return folder


def test_no_cargo_is_stopped_with_the_install(run_fdl, project: Path, tools: Path) -> None:
    result = run_fdl(["build"], cwd=project, env={"PATH": str(tools)})
    assert result.exit_code == 4, result.output
    assert "`fdl build` runs cargo, which is not on PATH" in result.stderr
    assert "https://sh.rustup.rs" in result.stderr
    assert "forge.rust-lang.org/infra/other-installation-methods" in result.stderr
    assert "Traceback" not in result.output
    # a command that runs no cargo is not asked about it
    assert run_fdl(["lint"], cwd=project, env={"PATH": str(tools)}).exit_code == 0


def test_an_old_rustc_is_stopped_before_cargo(run_fdl, project: Path, tools: Path) -> None:
    record = tools.parent / "cargo-ran"
    _tool(tools, "cargo", f'echo "$@" >> {record}')
    _tool(tools, "rustc", 'echo "rustc 1.63.0"')  # Debian 12's
    result = run_fdl(["build"], cwd=project, env={"PATH": str(tools)})
    assert result.exit_code == 4, result.output
    assert (
        "Cargo.toml:5:17: rust-version 1.85: the crate needs rustc 1.85 or newer" in result.stderr
    )
    assert "this rustc is 1.63.0" in result.stderr
    # no rustup here: the fix does not need it
    assert "rustup update" not in result.stderr
    assert "standalone installer" in result.stderr and "install.sh" in result.stderr
    assert not record.exists()
    # with rustup on PATH, rustup is the fix
    _tool(tools, "rustup", "exit 0")
    result = run_fdl(["build"], cwd=project, env={"PATH": str(tools)})
    assert result.exit_code == 4 and "rustup update stable" in result.stderr
    # a new enough rustc: cargo runs
    _tool(tools, "rustc", 'echo "rustc 1.95.0 (59807616e 2026-04-14)"')
    result = run_fdl(["build"], cwd=project, env={"PATH": str(tools)})
    assert result.exit_code == 0, result.output
    assert record.read_text() == "build\n"


def test_a_rustc_that_cannot_tell_does_not_stop_the_build(
    run_fdl, project: Path, tools: Path
) -> None:
    record = tools.parent / "cargo-ran"
    _tool(tools, "cargo", f'echo "$@" >> {record}')
    _tool(tools, "rustc", "echo 'error: toolchain 1.99.0 is not installed' >&2; exit 1")
    assert run_fdl(["build"], cwd=project, env={"PATH": str(tools)}).exit_code == 0
    assert record.read_text() == "build\n"


def test_a_failing_build_keeps_cargos_status_and_says_so(
    run_fdl, project: Path, tools: Path
) -> None:
    _tool(tools, "cargo", "echo 'error[E0425]: cannot find value `x` in this scope' >&2; exit 101")
    _tool(tools, "rustc", 'echo "rustc 1.95.0"')
    result = run_fdl(["build"], cwd=project, env={"PATH": str(tools)})
    assert result.exit_code == 101
    assert "`fdl build` failed: cargo exited with status 101" in result.stderr
    assert "Traceback" not in result.output


def _variant(project: Path, name: str, torch: str) -> None:
    directory = project / "libtorch" / name
    (directory / "lib").mkdir(parents=True)
    (directory / ".arch").write_text(f"cuda=none\ntorch={torch}\narchs=\nsource=precompiled\n")


def test_an_active_libtorch_the_framework_refuses_stops_the_build(
    run_fdl, project: Path, tools: Path
) -> None:
    record = tools.parent / "cargo-ran"
    _tool(tools, "cargo", f'echo "$@" >> {record}')
    _tool(tools, "rustc", 'echo "rustc 1.95.0"')
    (project / "Cargo.toml").write_text(CARGO_TOML + '\n[dependencies]\nflodl = "0.5.3"\n')
    _variant(project, "precompiled/cpu", "2.10.0")
    _variant(project, "precompiled/cpu-2.13", "2.13.0")
    (project / "libtorch" / ".active").write_text("precompiled/cpu-2.13\n")
    env = {"PATH": str(tools)}
    result = run_fdl(["build"], cwd=project, env=env)
    assert result.exit_code == 4, result.output
    assert "the active libtorch precompiled/cpu-2.13 is torch 2.13.0" in result.stderr
    assert "floDl 0.5.3" in result.stderr
    assert "fix: fdl libtorch activate precompiled/cpu (installed, fits)" in result.stderr
    assert not record.exists()
    # the fix it gives works; so does switching the check off
    assert run_fdl(["libtorch", "activate", "precompiled/cpu"], cwd=project, env=env).exit_code == 0
    assert run_fdl(["build"], cwd=project, env=env).exit_code == 0
    (project / "libtorch" / ".active").write_text("precompiled/cpu-2.13\n")
    off = ["--set", "libtorch.framework-check=false", "build"]
    assert run_fdl(off, cwd=project, env=env).exit_code == 0
    assert record.read_text() == "build\nbuild\n"
    # a command that builds nothing is not stopped
    assert run_fdl(["lint"], cwd=project, env=env).exit_code == 0


def test_a_framework_release_fdl_does_not_know_does_not_stop_the_build(
    run_fdl, project: Path, tools: Path
) -> None:
    _tool(tools, "cargo", "exit 0")
    _tool(tools, "rustc", 'echo "rustc 1.95.0"')
    (project / "Cargo.toml").write_text(CARGO_TOML + '\n[dependencies]\nflodl = "9.9.9"\n')
    _variant(project, "precompiled/cpu", "2.13.0")
    (project / "libtorch" / ".active").write_text("precompiled/cpu\n")
    assert run_fdl(["build"], cwd=project, env={"PATH": str(tools)}).exit_code == 0


def test_a_toolchain_file_rustup_would_hang_on_stops_the_build(
    run_fdl, project: Path, tools: Path
) -> None:
    """rustup (cargo's proxy) reads rust-toolchain.toml whole before anything: a FIFO there
    blocked `fdl build` for ever (issue "round 3", point 8)."""
    import os

    record = tools.parent / "cargo-ran"
    _tool(tools, "cargo", f'echo "$@" >> {record}')
    os.mkfifo(project / "rust-toolchain.toml")
    result = run_fdl(["build"], cwd=project, env={"PATH": str(tools)})
    assert result.exit_code == 4, result.output
    assert "rust-toolchain.toml is a FIFO" in result.stderr and "fix:" in result.stderr
    assert not record.exists()
