"""`fdl setup` on AMD GPUs (floDl's FLODL_TESTING_GPU_JSON stands in for them): the ROCm
build that covers them, the CPU build when none does, an installed ROCm variant kept, and
a machine with both vendors planned for NVIDIA with the AMD GPUs said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.libtorch import VariantInfo, variants
from fdl.paths import Context
from tests.support.libtorch_trees import make_tree


@pytest.fixture
def setup(run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FDL_LIBTORCH_MIRROR", raising=False)
    (tmp_path / "work").mkdir()

    def invoke(gpus: object, *args: str):
        env = {
            "FDL_HOME": str(tmp_path / "home"),
            "FDL_CACHE_DIR": str(tmp_path / "cache"),
            "FLODL_TESTING_GPU_JSON": json.dumps(gpus),
            "FDL_PYPI_URL": "http://127.0.0.1:9/pypi",
        }
        result = run_fdl(["setup", "--dry-run", "--json", *args], cwd=tmp_path / "work", env=env)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["plan"]

    return invoke


def test_amd_gpus_get_the_rocm_build_that_covers_them(setup) -> None:
    plan = setup([{"vendor": "amd", "arch": "gfx90a"}, {"vendor": "amd", "arch": "gfx1100"}])
    assert plan["action"] == "download"
    assert plan["command"] == "fdl libtorch download --rocm 7.0 --torch 2.10.0"
    assert plan["selection"]["vendor"] == "amd" and plan["selection"]["variant"] == "rocm7.0"
    assert "gfx90a, gfx1100: ROCm 7.0" in plan["reason"]


def test_an_amd_gpu_no_rocm_build_covers_gets_the_cpu_build_and_why(setup) -> None:
    plan = setup([{"vendor": "amd", "arch": "gfx906"}])
    assert plan["command"].startswith("fdl libtorch download --cpu")
    assert "has no kernels for gfx906" in plan["reason"]


def test_both_vendors_plan_for_nvidia_and_say_the_amd_gpus(setup) -> None:
    plan = setup([{"arch": "sm_86"}, {"vendor": "amd", "arch": "gfx1100"}], "--torch", "2.10.0")
    assert "--cuda" in plan["command"] and plan["selection"]["vendor"] == "nvidia"
    assert "AMD GPU(s) gfx1100 left out: one libtorch serves one vendor" in plan["reason"]
    assert any(
        a.startswith("fdl libtorch download --rocm 7.0 --torch 2.10.0 --no-activate")
        for a in plan["alternatives"]
    )


def test_an_installed_rocm_variant_that_covers_them_is_kept(setup, tmp_path: Path) -> None:
    context = Context(tmp_path / "home", project=False)
    path = make_tree(context.libtorch_dir / "precompiled" / "rocm70", "2.10.0+rocm7.0")
    info = VariantInfo(name="precompiled/rocm70", torch="2.10.0", extra={"rocm": "7.0"})
    info.archs_found = {"gfx": ["gfx90a", "gfx1100"]}
    variants.write_info(path, info)
    variants.activate(context, "precompiled/rocm70")
    plan = setup([{"vendor": "amd", "arch": "gfx1100"}])
    assert plan["action"] == "keep" and plan["variant"] == "precompiled/rocm70"
    other = setup([{"vendor": "amd", "arch": "gfx942"}])  # not among its gfx: download
    assert other["action"] == "download" and "--rocm 7.0" in other["command"]
