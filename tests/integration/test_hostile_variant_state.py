"""Hostile or damaged libtorch state ends in a documented error, never a hang, a
MemoryError or exit 70.

Every case runs fdl as a subprocess with a timeout: a hang (reading a FIFO) fails the test
instead of blocking the suite.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_fdl_process
from tests.support.libtorch_trees import make_tree

TIMEOUT = 60


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    make_tree(root / "libtorch" / "precompiled" / "cpu", "2.13.0+cpu")
    (root / "libtorch" / "precompiled" / "cpu" / "variant.json").write_text(
        json.dumps({"name": "precompiled/cpu", "torch": "2.13.0"}), encoding="utf-8"
    )
    return root


def fdl(home: Path, *args: str):
    return run_fdl_process(
        list(args), cwd=home.parent, env={"FDL_HOME": str(home)}, timeout=TIMEOUT
    )


ACTIVE_COMMANDS = [
    ("libtorch", "list"),
    ("libtorch", "info"),
    ("libtorch", "verify"),
    ("libtorch", "remove", "precompiled/cpu", "--yes"),
    ("diagnose",),
]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"precompiled/\xff\xfe\n")


@pytest.mark.parametrize("damage", [_fifo, _dev_zero, _directory, _not_utf8])
@pytest.mark.parametrize("command", ACTIVE_COMMANDS, ids=" ".join)
def test_a_damaged_active_pointer_is_an_environment_error(home: Path, damage, command) -> None:
    damage(home / "libtorch" / ".active")
    result = fdl(home, *command)
    assert result.exit_code == 4, result.output
    assert "libtorch/.active" in result.stderr and "fix:" in result.stderr


@pytest.mark.parametrize(
    "content",
    [
        b'{"torch": ["2", "13"], "cuda": {"x": 1}, "archs_found": [1, 2], "source": 7}',
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe not json",
        b'"just a string"',
    ],
    ids=["wrong-types", "deep-nesting", "not-utf8", "not-an-object"],
)
def test_corrupt_metadata_shows_an_unknown_version(home: Path, content: bytes) -> None:
    variant = home / "libtorch" / "precompiled" / "cpu"
    (variant / "variant.json").write_bytes(content)
    (variant / "build-version").write_bytes(b"\xff\xfe+cpu\n")
    for command in (("libtorch", "list"), ("libtorch", "info", "precompiled/cpu")):
        result = fdl(home, *command)
        assert result.exit_code == 0, result.output
        assert "precompiled/cpu" in result.output


def test_a_variant_name_over_the_limit_is_a_usage_error(home: Path) -> None:
    for command in ("info", "activate", "remove"):
        result = fdl(home, "libtorch", command, "precompiled/" + "x" * 5000)
        assert result.exit_code == 2, result.output
        assert "at most 200 bytes" in result.stderr
        assert len(result.stderr) < 2000


@pytest.mark.parametrize("kind", ["file", "devnull", "long", "proc"])
def test_an_unusable_fdl_home_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    if kind == "file":
        home = tmp_path / "home"
        home.write_text("not a directory\n")
    elif kind == "devnull":
        home = Path("/dev/null")
    elif kind == "proc":
        home = Path("/proc")
    else:
        home = tmp_path / ("h" * 300)
    tree = make_tree(tmp_path / "tree", "2.13.0+cpu")
    for command in (["libtorch", "list"], ["libtorch", "install", "--from-dir", str(tree)]):
        result = run_fdl_process(
            command, cwd=tmp_path, env={"FDL_HOME": str(home)}, timeout=TIMEOUT
        )
        assert result.exit_code == 2, result.output
        assert "$FDL_HOME" in result.stderr and "fix:" in result.stderr
