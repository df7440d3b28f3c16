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


def test_other_projects_are_not_asked_about_rust(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text("commands: {}\n")
    checks = _checks(run_fdl, tmp_path, "/usr/bin:/bin")
    assert "cargo" not in checks and "rustc" not in checks
