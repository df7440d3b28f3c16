"""`fdl probe`: floDl 0.8's readiness gate (its JSON keys and exit 1 when not ready), and
what fdl adds: the NCCL the run will load read for code covering every NVIDIA GPU, the
driver held to the variant's CUDA, an AMD variant held to its gfx targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin
from fdl.libtorch import VariantInfo, variants
from tests.support.libtorch_trees import make_tree

RIG = '[{"arch":"sm_61","name":"NVIDIA GeForce GTX 1060 6GB","vram_mb":6144},{"arch":"sm_120","name":"NVIDIA GeForce RTX 5060 Ti","vram_mb":16311}]'


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for key in (
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "FDL_LIBTORCH_MIRROR",
    ):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "work").mkdir()
    (tmp_path / "data").mkdir()
    env = {
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FLODL_TESTING_GPU_JSON": RIG,
        "FLODL_HOST_NAME": "rig",
        "CUDA_HOME": str(tmp_path / "cuda"),
    }
    return tmp_path, env


def _variant(root: Path, name: str, version: str, cuda: str | None, cubins=(), nccl=None) -> Path:
    path = make_tree(root / "home" / "libtorch" / name, version, cubins=cubins, cuda_needed=())
    if nccl is not None:
        fatbin = build_fatbin([[FakeEntry("cubin", arch) for arch in nccl]])
        (path / "lib" / "libnccl.so.2").write_bytes(
            build_elf({".nv_fatbin": fatbin}, soname="libnccl.so.2")
        )
    info = VariantInfo(name=name, torch=version.split("+", maxsplit=1)[0], cuda=cuda)
    info.archs_found = {"cubin": [f"sm_{c}" for c in cubins], "ptx": []}
    variants.write_info(path, info)
    variants.activate(variants_context(root), name)
    return path


def variants_context(root: Path):
    from fdl.paths import Context

    return Context(root / "home", project=False)


def test_a_rig_whose_nccl_lacks_a_gpu_is_not_ready(run_fdl, machine) -> None:
    root, env = machine
    _variant(root, "builds/sm61-sm120", "2.10.0+cu129", "12.9", cubins=(61, 120), nccl=(70, 120))
    result = run_fdl(
        ["probe", "--json", "--data-path", str(root / "data")], cwd=root / "work", env=env
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert set(report) >= {
        "host",
        "gpus",
        "libtorch",
        "data_path",
        "nccl",
        "issues",
        "warnings",
        "ready",
    }
    assert report["host"] == "rig" and report["ready"] is False
    assert [g["sm"] for g in report["gpus"]] == ["sm_61", "sm_120"]
    assert report["libtorch"]["archs_match"] == [
        {"gpu": 0, "covered": True},
        {"gpu": 1, "covered": True},
    ]
    assert report["data_path"] == {
        "path": str(root / "data"),
        "exists": True,
        "readable": True,
        "fs_type": report["data_path"]["fs_type"],
    }
    assert report["nccl"]["where"] == "variant" and report["nccl"]["cubins"] == ["sm_70", "sm_120"]
    assert len(report["issues"]) == 1
    assert "libnccl.so.2 has no code for GPU 0 (sm_61)" in report["issues"][0]


def test_the_same_rig_with_an_nccl_for_both_gpus_is_ready(run_fdl, machine) -> None:
    root, env = machine
    _variant(root, "builds/sm61-sm120", "2.10.0+cu129", "12.9", cubins=(61, 120), nccl=(61, 120))
    result = run_fdl(["probe", "--data-path", str(root / "data")], cwd=root / "work", env=env)
    assert result.exit_code == 0, result.output
    assert "verdict: READY" in result.stdout and "2/2 GPUs covered" in result.stdout


def test_a_variant_without_code_for_a_gpu_and_a_missing_data_path(run_fdl, machine) -> None:
    root, env = machine
    _variant(root, "precompiled/cu130", "2.10.0+cu130", "13.0", cubins=(75, 120), nccl=(75, 120))
    result = run_fdl(
        ["probe", "--json", "--data-path", str(root / "nowhere")], cwd=root / "work", env=env
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["libtorch"]["archs_match"][0] == {"gpu": 0, "covered": False}
    issues = " | ".join(report["issues"])
    assert "no code for GPU 0" in issues and "fdl setup" in issues
    assert f"shared data path {root / 'nowhere'} does not exist" in issues
    assert "libnccl.so.2 has no code for GPU 0 (sm_61)" in issues


def test_gpus_hidden_by_the_visibility_mask_are_not_probed(run_fdl, machine) -> None:
    root, env = machine
    _variant(root, "precompiled/cu130", "2.10.0+cu130", "13.0", cubins=(75, 120), nccl=(75, 120))
    result = run_fdl(
        ["probe", "--json", "--skip-mount"],
        cwd=root / "work",
        env={**env, "CUDA_VISIBLE_DEVICES": "1"},
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [g["index"] for g in report["gpus"]] == [1] and report["data_path"] is None


def test_an_amd_machine_with_a_rocm_variant(run_fdl, machine) -> None:
    root, env = machine
    env = {
        **env,
        "FLODL_TESTING_GPU_JSON": '[{"vendor":"amd","arch":"gfx90a"},{"vendor":"amd","arch":"gfx906"}]',
    }
    path = make_tree(root / "home" / "libtorch" / "precompiled" / "rocm70", "2.10.0+rocm7.0")
    info = VariantInfo(name="precompiled/rocm70", torch="2.10.0", extra={"rocm": "7.0"})
    info.archs_found = {"gfx": ["gfx908", "gfx90a"]}
    variants.write_info(path, info)
    variants.activate(variants_context(root), "precompiled/rocm70")
    result = run_fdl(["probe", "--json", "--skip-mount"], cwd=root / "work", env=env)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["libtorch"]["vendor"] == "amd" and report["nccl"] is None
    assert report["libtorch"]["archs_match"] == [
        {"gpu": 0, "covered": True},
        {"gpu": 1, "covered": False},
    ]
    assert [g["sm"] for g in report["gpus"]] == ["", ""]
    assert any("no code for GPU 1" in i for i in report["issues"])


def test_an_amd_card_without_rocm_is_an_issue_not_a_device(run_fdl, machine) -> None:
    root, env = machine
    note = {
        "vendor": "amd",
        "kind": "hardware_unusable",
        "message": "1 AMD GPU(s) present (gfx1100) but no ROCm runtime was found",
    }
    env = {**env, "FLODL_TESTING_GPU_JSON": json.dumps({"gpus": [], "notes": [note]})}
    result = run_fdl(["probe", "--json", "--skip-mount"], cwd=root / "work", env=env)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["gpus"] == [] and report["gpu_notes"] == [note]
    assert note["message"] in report["issues"] and any(
        "no usable GPUs" in i for i in report["issues"]
    )


def test_a_malformed_spoof_is_a_usage_error(run_fdl, machine) -> None:
    root, env = machine
    result = run_fdl(
        ["probe"], cwd=root / "work", env={**env, "FLODL_TESTING_GPU_JSON": "[" * 50_000}
    )
    assert result.exit_code == 2, result.output
    assert "FLODL_TESTING_GPU_JSON is set but cannot be read" in result.stderr


def test_an_nccl_on_ld_library_path_is_found(run_fdl, machine, tmp_path: Path) -> None:
    root, env = machine
    _variant(root, "precompiled/cu130", "2.10.0+cu130", "13.0", cubins=(61, 120))
    custom = tmp_path / "nccl" / "lib"
    custom.mkdir(parents=True)
    fatbin = build_fatbin([[FakeEntry("cubin", 61), FakeEntry("cubin", 120)]])
    (custom / "libnccl.so.2").write_bytes(build_elf({".nv_fatbin": fatbin}))
    result = run_fdl(
        ["probe", "--json", "--skip-mount"],
        cwd=root / "work",
        env={**env, "LD_LIBRARY_PATH": str(custom)},
    )
    report = json.loads(result.stdout)
    assert report["nccl"]["library_path"] == str(custom / "libnccl.so.2")
    assert report["nccl"]["where"] == "LD_LIBRARY_PATH"
    assert not any("nccl" in i.lower() for i in report["issues"])


def test_the_advice_names_an_nccl_wheel_that_covers_the_rig(run_fdl, machine) -> None:
    """A CUDA 13 variant on the sm_61 + sm_120 rig: NVIDIA's cu13 NCCL wheels start at
    sm_75, so the advice names the cu12 wheel that has both (read from PyPI's wheels)."""
    root, env = machine
    _variant(root, "precompiled/cu130", "2.13.0+cu130", "13.0", cubins=(61, 120), nccl=(75, 120))
    result = run_fdl(["probe", "--skip-mount"], cwd=root / "work", env=env)
    assert result.exit_code == 1, result.output
    assert "has no code for GPU 0 (sm_61)" in result.stdout
    assert "no CUDA 13 NCCL wheel has code for sm_61 sm_120; nvidia-nccl-cu12==" in result.stdout
    cu12 = _variant(root, "precompiled/cu128", "2.10.0+cu128", "12.8", cubins=(61, 120))
    (cu12 / "lib" / "libnccl.so.2").unlink(missing_ok=True)
    again = run_fdl(["probe", "--skip-mount"], cwd=root / "work", env=env)
    assert "no libnccl.so found" in again.stdout
    assert "nvidia-nccl-cu12==" in again.stdout and "has code for every GPU here" in again.stdout


IMAGE = "127.0.0.1:5000/acme/train@sha256:" + "ab" * 32
IMAGE_LIBTORCH = ["--variant", "precompiled/cu130", "--cuda", "13.0"]


def test_a_deploy_jobs_image_is_judged_against_this_nodes_gpus(run_fdl, machine) -> None:
    # What an `fdl deploy` job runs on its node: the image's libtorch as its labels say it,
    # no active variant and no NCCL here (both are the image's).
    root, env = machine
    argv = ["probe", "--json", "--skip-mount", "--image", IMAGE, *IMAGE_LIBTORCH]
    refused = run_fdl([*argv, "--archs", "sm_75 sm_120 compute_120"], cwd=root / "work", env=env)
    assert refused.exit_code == 1, refused.output
    report = json.loads(refused.stdout)
    assert report["libtorch"]["archs_match"] == [
        {"gpu": 0, "covered": False},
        {"gpu": 1, "covered": True},
    ]
    assert report["nccl"] == {"via_docker": IMAGE} and report["ready"] is False
    assert report["issues"] == [
        "the image's libtorch precompiled/cu130 (sm_75 sm_120 compute_120) has no code for "
        "GPU 0 (NVIDIA GeForce GTX 1060 6GB, sm_61) of this node: build the image with a "
        "variant that covers it (`fdl deploy render` names one), or keep the job off this node"
    ]
    ready = run_fdl([*argv, "--archs", "sm_61 sm_120"], cwd=root / "work", env=env)
    assert ready.exit_code == 0, ready.output
    assert json.loads(ready.stdout)["issues"] == []


def test_the_image_options_are_refused_without_an_image_or_with_a_bad_arch(
    run_fdl, machine
) -> None:
    root, env = machine
    alone = run_fdl(["probe", "--archs", "sm_90"], cwd=root / "work", env=env)
    assert alone.exit_code == 2 and "describe the libtorch of an --image" in alone.stderr
    bad = run_fdl(
        ["probe", "--image", IMAGE, *IMAGE_LIBTORCH, "--archs", "sm_90;rm -rf /"],
        cwd=root / "work",
        env=env,
    )
    assert bad.exit_code == 2 and "'rm'" in bad.stderr, bad.output


def test_the_gpus_option_narrows_what_is_probed(run_fdl, machine) -> None:
    """floDl's global --gpus: the probe looks at those devices only (both vendors)."""
    root, env = machine
    _variant(root, "precompiled/cu130", "2.10.0+cu130", "13.0", cubins=(75, 120), nccl=(75, 120))
    narrowed = run_fdl(
        ["--gpus", "1", "probe", "--json", "--skip-mount"], cwd=root / "work", env=env
    )
    assert narrowed.exit_code == 0, narrowed.output  # the GTX 1060 (GPU 0) is not looked at
    assert [g["index"] for g in json.loads(narrowed.stdout)["gpus"]] == [1]
    everything = run_fdl(
        ["--gpus", "all", "probe", "--json", "--skip-mount"],
        cwd=root / "work",
        env={**env, "CUDA_VISIBLE_DEVICES": "1"},
    )
    assert everything.exit_code == 1  # all: GPU 0 (sm_61) is back, and cu130 has no code for it
    assert [g["index"] for g in json.loads(everything.stdout)["gpus"]] == [0, 1]
