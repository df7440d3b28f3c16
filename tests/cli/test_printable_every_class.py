"""Issue 42, point 3: all text from outside goes through the printable rule before a
terminal. Each class of round 4 carries escape sequences (a title set by OSC, a screen
clear), a bell, a line separator and a bidi override into fdl; what fdl prints, on stdout
and stderr, piped as here, holds none of them raw and shows the value escaped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HOSTILE = "v\x1b]0;T\x07\x1b[2J\u2028\u202ex"
SHOWN = "v\\x1b]0;T\\x07\\x1b[2J\\u2028\\u202ex"
RAW = ("\x1b", "\x07", "\u2028", "\u202e", "\r")


def _clean(text: str) -> None:
    for char in RAW:
        assert char not in text, (char, text[-400:])


@pytest.mark.parametrize("args", [["--help"], ["go", "--help"], ["go", "--dry-run"]])
def test_a_command_s_description_is_shown_escaped_on_one_line(run_fdl, tmp_path, args) -> None:
    (tmp_path / "fdl.yml").write_text(
        f'commands:\n  go:\n    description: "{HOSTILE.encode("unicode_escape").decode()}"\n'
        "    run: echo hi\n"
    )
    result = run_fdl(args, cwd=tmp_path, env={"FDL_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    _clean(result.stdout + result.stderr)
    # one line: the line separator is a blank there, as a line break would be
    assert SHOWN.replace("\\u2028", " ") in result.stdout


def test_an_unknown_command_from_the_command_line_is_named_escaped(run_fdl, tmp_path) -> None:
    (tmp_path / "fdl.yml").write_text("commands:\n  go:\n    run: echo hi\n")
    result = run_fdl([HOSTILE], cwd=tmp_path, env={"FDL_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 2, result.output
    _clean(result.stdout + result.stderr)
    assert SHOWN in result.stderr


def _rust_tools(folder: Path) -> str:
    folder.mkdir()
    for name, answer in (("rustc", "rustc 1.80.0 (abc 2024-07-21)"), ("cargo", "cargo 1.80.0")):
        (folder / name).write_text(f'#!/bin/sh\necho "{answer}"\n')
        (folder / name).chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def test_a_crate_s_rust_version_is_named_escaped(run_fdl, tmp_path) -> None:
    (tmp_path / "fdl.yml").write_text("commands:\n  b:\n    run: cargo build\n")
    (tmp_path / "Cargo.toml").write_text(
        f'[package]\nname = "x"\nversion = "0.1.0"\nrust-version = "1.99{HOSTILE[1:]}"\n'
    )
    path = _rust_tools(tmp_path / "bin")
    result = run_fdl(["b"], cwd=tmp_path, env={"PATH": path, "FDL_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 4, result.output
    _clean(result.stdout + result.stderr)
    assert "rust-version 1.99" + SHOWN[1:] in result.stderr


def test_a_cargo_lock_s_text_is_named_escaped(run_fdl, tmp_path) -> None:
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "x"\nversion = "0.1.0"\n')
    (tmp_path / "Cargo.lock").write_text(
        f'version = 3\n\n[[package]]\nname = "tch"\nversion = "0.26.0{HOSTILE[1:]}"\n'
    )
    result = run_fdl(
        ["libtorch", "download", "--dry-run"],
        cwd=tmp_path,
        env={"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert result.exit_code in (3, 4), result.output
    _clean(result.stdout + result.stderr)
    assert "Cargo.lock" in result.stderr


def test_an_index_file_name_is_named_escaped(run_fdl, tmp_path) -> None:
    from tests.support.cpu_view_wheels import TORCH, PackageIndex
    from tests.support.faulty_http import FaultyServer

    with FaultyServer() as server:
        index = PackageIndex(server)
        index.add_torch(filename=f"torch-{TORCH}+cu128{HOSTILE[1:]}-cp311-cp311-linux_x86_64.whl")
        result = run_fdl(
            ["libtorch", "install", "--from-wheel", "--cpu", "--torch", TORCH],
            cwd=tmp_path,
            env={
                "FDL_HOME": str(tmp_path / "home"),
                "FDL_CACHE_DIR": str(tmp_path / "cache"),
                "PIP_INDEX_URL": index.url,
            },
        )
    assert result.exit_code in (4, 5), result.output
    _clean(result.stdout + result.stderr)
    assert f"+cu128{SHOWN[1:]}" in result.stderr
