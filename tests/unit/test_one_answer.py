"""One machine, one answer: setup, download's advice, the build plan and the native
preflight's fix name the same source build (torch, CUDA) with the same reason."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fdl.compat import parse_archs, parse_capability, preferred_toolkit
from fdl.errors import EnvironmentProblem
from fdl.libtorch import select_variant
from fdl.libtorch.build import BuildRequest, MachineFacts, Setting, plan_build
from tests.unit.test_build_plan import NVCC13, TOOLS

PASCAL_BLACKWELL = (parse_capability("6.1"), parse_capability("12.0"))


def _facts(tmp_path: Path, driver: str | None) -> MachineFacts:
    return MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=NVCC13,
        nvcc_reason=None,
        tools=TOOLS,
        tool_paths={"python3": "/usr/bin/python3", "ccache": "/usr/bin/ccache"},
        docker="buildkit",
        docker_reason=None,
        cores=8,
        ram_gb=64.0,
        disk_free_gb=200.0,
        driver=driver,
    )


def _request(backend: str) -> BuildRequest:
    return BuildRequest(
        archs=Setting("6.1,12.0", "--archs"), backend=Setting(backend, f"--{backend}")
    )


# (torch, driver) -> the CUDA every answer must name
CASES = [
    (None, "570.86", "12.9"),
    (None, None, "12.9"),
    ("2.10.0", "570.86", "12.9"),
    ("2.7.1", "570.86", "12.8"),
]


@pytest.mark.parametrize(("torch", "driver", "cuda"), CASES)
def test_every_place_names_the_same_build(
    tmp_path: Path, torch: str | None, driver: str | None, cuda: str
) -> None:
    selection = select_variant(PASCAL_BLACKWELL, torch=torch, driver=driver)
    assert not selection.covers_all
    assert selection.build_cuda == cuda
    assert f"CUDA {cuda}" in selection.reason  # setup's and diagnose's "why"
    facts = _facts(tmp_path, driver)
    request = _request("docker")
    if torch:
        request = replace(request, torch=Setting(torch, "--torch"))
    plan = plan_build(request, facts)
    assert plan.cuda == cuda
    assert plan.torch == selection.torch_version
    choice = preferred_toolkit(selection.torch_version, parse_archs("6.1,12.0"), driver)
    assert choice.why in " ".join(str(v) for v in plan.to_json().values())
    native = replace(request, backend=Setting("native", "--native"))
    with pytest.raises(EnvironmentProblem) as refused:
        plan_build(native, facts)
    assert f"`--docker` (CUDA {cuda}: {choice.why})" in (refused.value.hint or "")


def test_the_driver_decides_between_toolkits() -> None:
    """12.0a: CUDA 13.2 compiles it, but driver 570 runs CUDA 12.x code only."""
    archs = parse_archs("12.0a")
    assert preferred_toolkit(None, archs).version.startswith("13.")
    limited = preferred_toolkit(None, archs, "570.86")
    assert limited.version == "12.9"
    assert "runs on driver 570.86" in limited.why
    none_runs = preferred_toolkit(None, parse_archs("12.0"), "450.51")
    assert none_runs.driver_needed is not None


def test_a_declared_variant_is_what_setup_installs(tmp_path: Path) -> None:
    from fdl.libtorch import plan_setup
    from fdl.paths import Context

    context = Context(tmp_path / "home", project=False)
    plan = plan_setup(
        context,
        PASCAL_BLACKWELL,
        driver="570.86",
        preferred="cpu",
        preferred_origin="fdl.yml:15:12",
    )
    assert plan.action == "download"
    assert plan.command[:4] == ("fdl", "libtorch", "download", "--cpu")
    assert "fdl.yml:15:12" in plan.reason
    assert any("fdl libtorch build --archs 6.1,12.0" in a for a in plan.alternatives)
    detected = plan_setup(context, PASCAL_BLACKWELL, driver="570.86")
    assert detected.action == "build"


# --- recipes say what each switch costs, and keep what the project needs ---------------------


def test_switch_costs_name_what_these_gpus_lose() -> None:
    from fdl.compat import switch_costs

    costs = {
        c.name: c
        for c in switch_costs(
            {"USE_FLASH_ATTENTION": "0", "USE_NVSHMEM": "OFF", "USE_KINETO": "1"},
            parse_archs("6.1;12.0"),
            "flodl",
        )
    }
    assert set(costs) == {"USE_FLASH_ATTENTION", "USE_NVSHMEM"}  # USE_KINETO=1 is on
    assert costs["USE_FLASH_ATTENTION"].costs is not None
    assert costs["USE_FLASH_ATTENTION"].costs.startswith("sm_120:")  # sm_61 never ran it
    pascal_only = switch_costs({"USE_FLASH_ATTENTION": "0"}, parse_archs("6.1"))
    assert pascal_only[0].costs is None  # a Pascal-only build loses nothing by it
    ddp = switch_costs({"USE_DISTRIBUTED": "0"}, parse_archs("6.1;12.0"), "flodl")[0]
    assert ddp.needed is not None and "NCCL" in ddp.needed
    assert switch_costs({"USE_DISTRIBUTED": "0"}, parse_archs("12.0"), "cpp")[0].needed is None


def test_a_switch_the_project_needs_is_a_located_warning(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "small.yml").write_text(
        'description: small\narchs: "6.1;12.0"\nswitches:\n  USE_DISTRIBUTED: 0\n'
    )
    from fdl.libtorch.build import build_request

    request = build_request(
        None, {"recipe": (str(tmp_path / "recipes/small.yml"), "--recipe")}, tmp_path
    )
    request = replace(request, backend=Setting("docker", "--docker"))
    facts = replace(_facts(tmp_path, "570.86"), framework="flodl")
    plan = plan_build(request, facts)
    [warning] = [p for p in plan.problems if p.check == "switches"]
    assert "USE_DISTRIBUTED=0" in warning.message and "floDl" in warning.message
    assert warning.location is not None and warning.location.line == 4
    assert {c.name for c in plan.switch_costs} >= {"USE_DISTRIBUTED", "BUILD_TEST"}
    plain = plan_build(request, _facts(tmp_path, "570.86"))  # no framework known: no warning
    assert not [p for p in plain.problems if p.check == "switches"]


def test_builtin_cuda_recipes_keep_what_floDl_needs(tmp_path: Path) -> None:
    from fdl.libtorch.build import build_request
    from fdl.libtorch.recipes import list_recipes

    checked = []
    for recipe in list_recipes():
        request = build_request(None, {"recipe": (recipe.name, "--recipe")}, tmp_path)
        if request.value("cpu", False):
            continue
        checked.append(recipe.name)
        request = replace(request, backend=Setting("docker", "--docker"))
        plan = plan_build(request, replace(_facts(tmp_path, "570.86"), framework="flodl"))
        assert not [p for p in plan.problems if p.check == "switches"], recipe.name
        lost = [c for c in plan.switch_costs if c.name.startswith("USE_") and "ATTENTION" in c.name]
        assert not lost, (recipe.name, lost)
        assert plan.commands and plan.cuda, recipe.name  # a CUDA build was planned
    assert len(checked) >= 2, checked  # the CUDA recipes were reached


def test_the_projects_torch_is_what_its_builds_build(tmp_path: Path) -> None:
    from fdl.libtorch.build import build_request
    from fdl.manifest import load_manifest

    (tmp_path / "fdl.yml").write_text('libtorch:\n  torch: "2.10.0"\n  build:\n    archs: "8.6"\n')
    manifest = load_manifest(tmp_path)
    request = build_request(manifest, {}, tmp_path)
    assert request.torch is not None and request.value("torch") == "2.10.0"
    assert (
        request.torch.origin.startswith("fdl.yml:2:") and "libtorch.torch" in request.torch.origin
    )
    flagged = build_request(manifest, {"torch": ("2.13.0", "--torch")}, tmp_path)
    assert flagged.value("torch") == "2.13.0"


def test_project_framework_is_read_from_its_files(tmp_path: Path) -> None:
    from fdl.libtorch.build import project_framework

    assert project_framework(None) is None
    assert project_framework(tmp_path) is None
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "x"\n[dependencies]\nflodl = "0.5"\n')
    assert project_framework(tmp_path) == "flodl"
    (tmp_path / "Cargo.toml").write_text("not toml [")
    (tmp_path / "CMakeLists.txt").write_text("find_package(Torch REQUIRED)\n")
    assert project_framework(tmp_path) == "cpp"


def test_a_platform_without_libtorch_archives_installs_the_wheel(tmp_path: Path) -> None:
    """Linux arm64 (GH200, GB10): download.pytorch.org has no libtorch archive for it, so
    setup installs the platform's PyPI wheel (a CUDA 13 build there) and never offers an
    x86 archive."""
    from fdl.compat import libtorch_url
    from fdl.errors import UsageError
    from fdl.libtorch import plan_setup
    from fdl.paths import Context

    context = Context(tmp_path / "home", project=False)
    gh200 = (parse_capability("9.0"),)
    plan = plan_setup(context, gh200, driver="580.65", platform="linux-arm64")
    assert plan.action == "wheel" and plan.command[:4] == (
        "fdl",
        "libtorch",
        "install",
        "--from-wheel",
    )
    x86 = plan_setup(context, gh200, driver="580.65", platform="linux-x86_64")
    assert x86.action == "download"
    with pytest.raises(UsageError) as refused:
        libtorch_url("2.14.1", "cu130", platform="linux-arm64")
    assert "no official libtorch archive for linux-arm64" in refused.value.message
    assert "--from-wheel" in (refused.value.hint or "")
