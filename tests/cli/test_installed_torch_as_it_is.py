"""Issue 42, point 7: `fdl libtorch install --from-wheel --python PY` copies the torch
installed for PY as it is; what a user's environment may hold there (a link out of
torch/lib, a FIFO or /dev/zero where version.py is) is refused, naming it, before anything
is installed: never a link out of the variant, never a hang, never exit 70."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cpu_view_wheels import torch_members

VERSION = "2.10.0+cpu"


def _environment(root: Path) -> Path:
    """site-packages with torch 2.10.0+cpu, and a `python` that reports where it is."""
    site = root / "site-packages"
    for name, data in torch_members(VERSION, cuda=None).items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    answer = json.dumps({"torch": str(site / "torch"), "python": str(python)})
    python.write_text(f"#!/bin/sh\necho '{answer}'\n")
    python.chmod(0o755)
    return python


def _install(run_fdl, tmp_path: Path, python: Path):
    (tmp_path / "work").mkdir(exist_ok=True)
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
    args = ["-q", "libtorch", "install", "--from-wheel", "--python", str(python), "--json"]
    return run_fdl(args, cwd=tmp_path / "work", env=env)


def _variants(tmp_path: Path) -> list[str]:
    root = tmp_path / "home" / "libtorch" / "precompiled"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_an_installed_torch_is_copied(run_fdl, tmp_path: Path) -> None:
    python = _environment(tmp_path)
    result = _install(run_fdl, tmp_path, python)
    assert result.exit_code == 0, result.output
    tree = Path(json.loads(result.stdout)["path"])
    assert (tree / "lib" / "libc10.so").is_file()
    assert (tree / "build-version").read_text() == f"{VERSION}\n"


@pytest.mark.parametrize("target", ["/etc/passwd", "/", "../../../../outside"])
def test_a_link_out_of_torch_lib_is_refused(run_fdl, tmp_path: Path, target: str) -> None:
    python = _environment(tmp_path)
    (tmp_path / "outside").write_text("not torch's\n")
    link = tmp_path / "site-packages" / "torch" / "lib" / "libevil.so"
    link.symlink_to(target)
    result = _install(run_fdl, tmp_path, python)
    assert result.exit_code == 4, result.output
    assert "libevil.so is a link to" in result.stderr and "\n  fix: " in result.stderr
    assert _variants(tmp_path) == []
    assert not [p for p in (tmp_path / "home").rglob("libevil.so")]


def test_a_link_inside_torch_lib_is_kept(run_fdl, tmp_path: Path) -> None:
    python = _environment(tmp_path)
    (tmp_path / "site-packages" / "torch" / "lib" / "libc10.so.2").symlink_to("libc10.so")
    result = _install(run_fdl, tmp_path, python)
    assert result.exit_code == 0, result.output
    tree = Path(json.loads(result.stdout)["path"])
    assert os.readlink(tree / "lib" / "libc10.so.2") == "libc10.so"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_version_py_that_is_no_regular_file_is_refused_without_a_hang(
    run_fdl, tmp_path: Path, kind: str
) -> None:
    python = _environment(tmp_path)
    version_py = tmp_path / "site-packages" / "torch" / "version.py"
    version_py.unlink()
    if kind == "fifo":
        os.mkfifo(version_py)
    else:
        version_py.symlink_to("/dev/zero")
    result = _install(run_fdl, tmp_path, python)
    assert result.exit_code == 4, result.output
    assert "version.py" in result.stderr and "not a file" in result.stderr
    assert _variants(tmp_path) == []


def test_a_fifo_in_torch_lib_is_refused_without_a_hang(run_fdl, tmp_path: Path) -> None:
    python = _environment(tmp_path)
    os.mkfifo(tmp_path / "site-packages" / "torch" / "lib" / "libfifo.so")
    result = _install(run_fdl, tmp_path, python)
    assert result.exit_code == 2, result.output  # copy_tree's documented refusal
    assert "libfifo.so is a FIFO" in result.stderr
    assert _variants(tmp_path) == []


def test_setup_quotes_the_python_it_suggests(run_fdl, tmp_path: Path) -> None:
    """Issue 42, 9: the `--python PATH` setup prints is pasted into a shell: quoted."""
    import shlex

    root = tmp_path / "my env $HOME; x"
    python = _environment(root)
    (tmp_path / "work").mkdir()
    env = {
        "VIRTUAL_ENV": str(root),
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_NVML": "0",
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",  # no nvidia-smi
        "FDL_COMPAT_MAX_AGE_DAYS": "0",  # PyPI not asked
        "FDL_PYPI_URL": "http://127.0.0.1:9/pypi",
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    }
    result = run_fdl(
        ["setup", "--dry-run", "--torch", "2.10.0", "--json"], cwd=tmp_path / "work", env=env
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    command = plan["command"] if "command" in plan else plan["plan"]["command"]
    assert shlex.split(command) == [
        "fdl",
        "libtorch",
        "install",
        "--from-wheel",
        "--python",
        str(python),
    ]


def test_a_wheel_file_whose_metadata_is_not_utf8_is_no_internal_error(
    run_fdl, tmp_path: Path
) -> None:
    import io
    import zipfile

    members = torch_members(VERSION, cuda=None)
    members["torch-2.10.0+cpu.dist-info/METADATA"] = b"Name: torch\nVersion: 2.10.0\xff\xfe\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    wheel = tmp_path / "torch-2.10.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(out.getvalue())
    (tmp_path / "work").mkdir()
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
    result = run_fdl(
        ["libtorch", "install", "--from-wheel", str(wheel)], cwd=tmp_path / "work", env=env
    )
    assert result.exit_code == 4, result.output
    assert "its version" in result.stderr and "internal error" not in result.output
    assert _variants(tmp_path) == []
