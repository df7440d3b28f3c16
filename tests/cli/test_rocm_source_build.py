"""`fdl libtorch build --rocm-archs`: PyTorch's ROCm build planned (PYTORCH_ROCM_ARCH, the
hipify and build steps) and checked against the machine's ROCm (its CMake components, its
device libraries per gfx processor, its compiler); fdl does not run it yet and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.compat import load_table
from fdl.errors import UsageError
from fdl.libtorch.build import parse_rocm_archs, plan_rocm_build, rocm_build_facts


def _rocm(root: Path, *, isas: tuple[str, ...] = ("906", "90a", "1100"), skip: str = "") -> Path:
    """A ROCm installation's files as fdl reads them."""
    table = load_table("rocm")["source_build"]
    for name in [*table["packages"], *table["optional"]]:
        if name != skip:
            folder = root / "lib" / "cmake" / name
            folder.mkdir(parents=True)
            (folder / f"{name}-config.cmake").write_text("# fake\n")
    bitcode = root / "amdgcn" / "bitcode"
    bitcode.mkdir(parents=True)
    for isa in isas:
        (bitcode / f"oclc_isa_version_{isa}.bc").write_bytes(b"BC")
    (root / "bin").mkdir()
    (root / "bin" / "hipcc").write_text("#!/bin/sh\n")
    return root


def test_a_full_rocm_makes_a_ready_plan(run_fdl, tmp_path: Path) -> None:
    rocm = _rocm(tmp_path / "rocm")
    env = {"ROCM_PATH": str(rocm), "FDL_HOME": str(tmp_path / "home")}
    result = run_fdl(
        [
            "libtorch",
            "build",
            "--rocm-archs",
            "gfx906;gfx90a,gfx1100",
            "--torch",
            "2.10.0",
            "--dry-run",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["ready"] is True and plan["problems"] == [] and plan["runs"] is False
    assert plan["env"]["PYTORCH_ROCM_ARCH"] == "gfx906;gfx90a;gfx1100"
    assert (plan["env"]["USE_ROCM"], plan["env"]["ROCM_PATH"]) == ("1", str(rocm))
    assert plan["steps"] == [
        ["python", "tools/amd_build/build_amd.py"],
        ["python", "tools/build_libtorch.py"],
    ]
    assert plan["device_libraries"] == ["gfx906", "gfx90a", "gfx1100"]
    run = run_fdl(
        ["libtorch", "build", "--rocm-archs", "gfx90a", "--torch", "2.10.0"], cwd=tmp_path, env=env
    )
    assert run.exit_code == 2 and "does not run it yet" in run.stderr
    assert "fdl libtorch download --rocm 7.0" in run.stderr


def test_what_is_missing_is_said_with_its_fix(run_fdl, tmp_path: Path) -> None:
    rocm = _rocm(tmp_path / "rocm", isas=("906", "90a"), skip="miopen")
    result = run_fdl(
        ["libtorch", "build", "--rocm-archs", "gfx90a;gfx1100", "--torch", "2.10.0", "--dry-run"],
        cwd=tmp_path,
        env={"ROCM_PATH": str(rocm), "FDL_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 4, result.output
    assert "lacks the ROCm components PyTorch's build requires: miopen" in result.stdout
    assert "no code for gfx1100 (they go up to gfx90a)" in result.stdout
    assert "oclc_isa_version_1100.bc" in result.stdout
    assert (
        "error: the ROCm build cannot run here" in result.stderr
        and "(and 1 more, above)" in result.stderr
    )


@pytest.mark.parametrize("text", ["", "sm_86", "gfx90a;rm -rf /", "gfx" + "9" * 40])
def test_archs_that_are_not_gfx_processors_are_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_rocm_archs(text)
    assert parse_rocm_archs(" GFX90A , gfx90a;gfx1030 ") == ("gfx90a", "gfx1030")


def test_a_source_tree_of_another_release_is_a_problem(tmp_path: Path) -> None:
    rocm = _rocm(tmp_path / "rocm")
    (tmp_path / "pytorch").mkdir()
    (tmp_path / "pytorch" / "version.txt").write_text("2.9.1a0\n")
    facts = rocm_build_facts({"ROCM_PATH": str(rocm)}, tmp_path / "pytorch")
    plan = plan_rocm_build("2.10.0", ("gfx90a",), facts)
    assert [p for p, _ in plan.problems] == ["the --source tree is PyTorch 2.9.1, not 2.10.0"]


def test_no_rocm_at_all() -> None:
    from fdl.libtorch.build import RocmBuildFacts

    facts = RocmBuildFacts(root=None, packages={}, isas=frozenset(), compiler=None)
    plan = plan_rocm_build("2.10.0", ("gfx90a",), facts)
    assert plan.problems[0][0].startswith("no ROCm installation") and "ROCM_PATH" not in plan.env


def test_debians_hipcc_is_read_as_a_partial_rocm() -> None:
    """This machine's Debian hipcc (ROCm 5.2): its CMake components and device libraries are
    found where Debian puts them, and what PyTorch needs beyond them is said."""
    facts = rocm_build_facts({})
    if facts.root != "/usr":
        pytest.skip("Debian's hipcc is not installed (scripts/setup-machine.sh installs it)")
    assert {"hip", "amd_comgr"} <= set(facts.packages) and "gfx90a" in facts.isas
    plan = plan_rocm_build("2.10.0", ("gfx90a",), facts)
    assert plan.problems and "rocblas" in plan.problems[0][0]
