"""`fdl libtorch install --from-wheel` when pip fails: an unreachable index is exit 5 and a
pip constraint of the environment that excludes the version is exit 4, each with the fix
and without pip's own lines, which `-v` shows. Real pip, a loopback index nobody serves."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import run_fdl_process

UNREACHABLE = "http://127.0.0.1:9/simple"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        # pip on its own: no configuration file (its indexes, links, constraints), one retry
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_FIND_LINKS": "",
        "PIP_RETRIES": "1",
        "PIP_CONSTRAINT": "",
    }
    env.update(extra)
    return env


def test_an_unreachable_index_is_a_network_error_with_the_fix(tmp_path: Path) -> None:
    args = ["libtorch", "install", "--from-wheel", "--torch", "2.13.0"]
    done = run_fdl_process([*args, "--index-url", UNREACHABLE], tmp_path, _env(tmp_path))
    assert done.exit_code == 5, done.stderr
    assert f"could not reach the package index {UNREACHABLE}" in done.stderr
    assert "--from-wheel PATH.whl" in done.stderr and "fdl libtorch download" in done.stderr
    assert "Retrying" not in done.stderr and "WARNING" not in done.stderr
    assert len(done.stderr.splitlines()) <= 6
    verbose = run_fdl_process(["-v", *args, "--index-url", UNREACHABLE], tmp_path, _env(tmp_path))
    assert verbose.exit_code == 5
    assert "Looking in indexes" in verbose.stderr


def test_a_pip_constraint_capping_torch_is_an_environment_problem(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch<=2.12\n")
    done = run_fdl_process(
        ["libtorch", "install", "--from-wheel", "--torch", "2.13.0", "--index-url", UNREACHABLE],
        tmp_path,
        _env(tmp_path, PIP_CONSTRAINT=str(constraints)),
    )
    assert done.exit_code == 4, done.stderr
    assert "excludes torch 2.13.0: torch<=2.12" in done.stderr
    assert f"PIP_CONSTRAINT={constraints}" in done.stderr
    assert "PIP_CONSTRAINT=/dev/null" in done.stderr and "--torch VERSION" in done.stderr
    assert "ResolutionImpossible" not in done.stderr
