"""The native preflight checks the tools the build will run (issue 14): the build venv's
pip CMake rather than an old system CMake, and the source tree's own requirements file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fdl.compat import toolkit
from fdl.errors import EnvironmentProblem
from fdl.libtorch.build import BuildRequest, MachineFacts, Nvcc, Setting, plan_build, probe_source

FAKE = Path(__file__).resolve().parent.parent / "fixtures" / "fake-pytorch"


def facts(tmp_path: Path, *, cmake: str | None, source: Path | None = None) -> MachineFacts:
    tools = {"gcc": "12.2.0", "g++": "12.2.0", "python3": "3.11.2", "git": "2.39", "ninja": "1"}
    if cmake:
        tools["cmake"] = cmake
    return MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=Nvcc("12.8", "12.8.93", "/opt/cuda/bin/nvcc", toolkit("12.8").targets, "/opt/cuda"),
        nvcc_reason=None,
        tools=tools,
        tool_paths={"python3": "/usr/bin/python3"},
        docker=None,
        docker_reason="not probed",
        cores=8,
        ram_gb=64.0,
        disk_free_gb=500.0,
        source=probe_source(source) if source else None,
    )


def native(**values: object) -> BuildRequest:
    given = {k: Setting(v, f"--{k}") for k, v in values.items()}
    return BuildRequest(backend=Setting("native", "--native"), **given)  # type: ignore[arg-type]


@pytest.mark.parametrize("cmake", ["3.25.1", None], ids=["system CMake too old", "none"])
def test_a_clone_build_uses_the_venvs_cmake_not_the_systems(tmp_path: Path, cmake) -> None:
    """The same plan whatever the system has (torch 2.10 needs CMake >= 3.27; Debian 12's
    is 3.25.1): the build venv gets pip's CMake and the build runs in that venv."""
    plan = plan_build(native(archs="8.6", torch="2.10.0"), facts(tmp_path, cmake=cmake))
    assert [p for p in plan.problems if "cmake" in (p.check + p.message).lower()] == []
    python = f"{plan.venv}/bin/python"
    deps, build = plan.command("deps"), plan.command("build")
    assert deps is not None and deps.argv[:4] == (python, "-m", "pip", "install")
    assert "cmake>=3.27" in deps.argv
    assert build is not None and build.argv[0] == python  # the venv's cmake on its PATH


def test_source_requirements_build_txt_is_what_the_venv_gets(tmp_path: Path) -> None:
    tree = tmp_path / "pytorch"

    shutil.copytree(FAKE, tree)
    (tree / "requirements-build.txt").write_text("setuptools<80\ncmake>=3.27\nninja\nsix\n")
    (tree / "requirements.txt").write_text("-r requirements-build.txt\nexpecttest\n")
    probed = probe_source(tree)
    assert probed.requirements == "requirements-build.txt" and probed.requirements_cmake
    plan = plan_build(native(cpu=True, source=tree), facts(tmp_path, cmake="3.10.2", source=tree))
    deps = plan.command("deps")
    assert deps is not None and deps.argv[-2:] == ("-r", str(tree / "requirements-build.txt"))


def test_without_a_cmake_requirement_the_system_cmake_is_checked(tmp_path: Path) -> None:

    tree = tmp_path / "pytorch"
    shutil.copytree(FAKE, tree)
    (tree / "requirements.txt").write_text("pyyaml\n")
    with pytest.raises(EnvironmentProblem, match=r"cmake 3\.10\.2 on this machine is older"):
        plan_build(native(cpu=True, source=tree), facts(tmp_path, cmake="3.10.2", source=tree))


def test_a_toolkit_fdl_does_not_know_is_judged_by_what_its_nvcc_accepts() -> None:
    """No facts of the toolkit (kit None): only the archs its nvcc refuses, with the same fix."""
    from fdl.compat import parse_archs
    from fdl.libtorch.build._checks import ToolkitNeed, check_toolkit

    archs = parse_archs("8.6 12.0")
    accepted = parse_archs("8.6")
    need = ToolkitNeed(archs, native=True)
    (problem,) = check_toolkit(None, accepted, need, what="the local nvcc 99.1")
    assert problem.message == "the local nvcc 99.1 does not accept sm_120"
    assert problem.hint == need.fix()
    assert check_toolkit(None, archs, need, what="the local nvcc 99.1") == []


def test_cmake_and_python_are_told_by_their_names_missing_or_old() -> None:
    from fdl.libtorch.build._checks import check_cmake, check_python

    (none,) = check_cmake(None, "2.10.0", where="the host", need="3.27")
    assert (none.check, none.message, none.hint) == (
        "cmake",
        "no cmake on the host",
        "install CMake >= 3.27",
    )
    (old,) = check_cmake("3.25.1", "2.10.0", where="the host", need="3.27")
    assert old.message == "cmake 3.25.1 on the host is older than PyTorch 2.10.0 needs (>= 3.27)"
    assert old.hint.startswith("`pip install 'cmake>=3.27'`")
    assert check_cmake("3.27.0", "2.10.0", where="the host", need="3.27") == []
    (none,) = check_python(None, "2.10.0", where="the host")
    assert (none.check, none.message) == ("python", "no python3 on the host")
    assert none.hint.startswith("install Python >= ")
    (old,) = check_python("2.7.18", "2.10.0", where="the host")
    assert old.message.startswith("Python 2.7.18 on the host is older than PyTorch 2.10.0 needs")
