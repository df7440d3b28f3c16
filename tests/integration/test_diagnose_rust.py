"""`fdl diagnose` in a Rust (floDl) project checks cargo and rustc against the crate."""

from __future__ import annotations

import json
from pathlib import Path


def _program(folder: Path, name: str, output: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(0o755)


def _checks(run_fdl, project: Path, path: str) -> dict[str, dict]:
    result = run_fdl(["diagnose", "--no-docker", "--json"], cwd=project, env={"PATH": path})
    assert result.exit_code == 0, result.output
    return {c["name"]: c for c in json.loads(result.stdout)["checks"] if c["group"] == "toolchain"}


def test_rust_projects_get_their_toolchain_checked(run_fdl, tmp_path: Path) -> None:
    project = tmp_path / "model"
    project.mkdir()
    (project / "fdl.yml").write_text("commands:\n  build: {run: cargo build}\n")
    (project / "Cargo.toml").write_text('[package]\nname = "model"\nedition = "2024"\n')
    tools = tmp_path / "bin"
    tools.mkdir()
    base = str(tools)  # nothing else: the machine's own cargo must not answer
    checks = _checks(run_fdl, project, base)
    assert checks["cargo"]["severity"] == "error" and "not found" in checks["cargo"]["message"]
    assert "rustup" in checks["cargo"]["fix"]
    _program(tools, "cargo", "cargo 1.80.0 (376290515 2024-07-16)")
    _program(tools, "rustc", "rustc 1.80.0 (051478957 2024-07-21)")
    checks = _checks(run_fdl, project, base)
    assert checks["cargo"]["severity"] == "ok"
    edition = checks["rust edition"]
    assert edition["severity"] == "error" and "needs rustc 1.85" in edition["message"]
    _program(tools, "rustc", "rustc 1.95.0 (59807616e 2026-04-14)")
    assert "rust edition" not in _checks(run_fdl, project, base)


def test_a_mounted_project_needs_no_rust_on_the_host(run_fdl, tmp_path: Path) -> None:
    """Its cargo commands run in compose services (issue 34, point 14): the host's missing
    toolchain is information, not an error."""
    project = tmp_path / "model"
    project.mkdir()
    (project / "fdl.yml").write_text(
        "commands:\n  build: {run: cargo build, docker: dev}\n  shell: {run: bash}\n"
    )
    (project / "Cargo.toml").write_text('[package]\nname = "model"\nedition = "2024"\n')
    (tmp_path / "bin").mkdir()
    checks = _checks(run_fdl, project, str(tmp_path / "bin"))
    assert checks["cargo"]["severity"] == "info", checks["cargo"]
    assert "run in its containers" in checks["cargo"]["message"]
    # one cargo command on the host makes it needed again
    (project / "fdl.yml").write_text(
        "commands:\n  build: {run: cargo build, docker: dev}\n  bench: {run: cargo bench}\n"
    )
    assert _checks(run_fdl, project, str(tmp_path / "bin"))["cargo"]["severity"] == "error"


def test_other_projects_are_not_asked_about_rust(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text("commands: {}\n")
    checks = _checks(run_fdl, tmp_path, "/usr/bin:/bin")
    assert {"gcc", "g++", "cmake"} <= set(checks)  # the toolchain was checked
    assert "cargo" not in checks and "rustc" not in checks


def test_the_pinned_toolchain_and_the_images_toolchain_agree(run_fdl, tmp_path: Path) -> None:
    project = tmp_path / "model"
    project.mkdir()
    setup = "sh /tmp/rustup-init.sh -y --default-toolchain 1.95.0 --component clippy"
    (project / "fdl.yml").write_text(
        "commands:\n  build: {run: cargo build}\n"
        f"images:\n  train:\n    setup: ['{setup}']\n    build: cargo build --release\n"
        "    program: target/release/model\n"
    )
    (project / "Cargo.toml").write_text('[package]\nname = "model"\nedition = "2024"\n')
    (project / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.95.0"\n')
    tools = tmp_path / "bin"
    tools.mkdir()
    assert "image train" not in _checks(run_fdl, project, str(tools))
    (project / "rust-toolchain.toml").write_text('[toolchain]\nchannel = "1.96.0"\n')
    check = _checks(run_fdl, project, str(tools))["image train"]
    assert check["severity"] == "warning"
    assert "installs Rust 1.95.0, but rust-toolchain.toml pins 1.96.0" in check["message"]
    assert "--default-toolchain 1.96.0" in check["fix"]
    # a pinned toolchain rustup has not installed: the fix installs that one
    _program(tools, "cargo", "error: toolchain '1.96.0-x86_64-unknown-linux-gnu' is not installed")
    (tools / "cargo").write_text(
        "#!/bin/sh\necho \"error: toolchain '1.96.0-x86_64-unknown-linux-gnu' is not installed\" >&2\n"
        "exit 1\n"
    )
    cargo = _checks(run_fdl, project, str(tools))["cargo"]
    assert cargo["severity"] == "error" and "rustup toolchain install 1.96.0" in cargo["fix"]
