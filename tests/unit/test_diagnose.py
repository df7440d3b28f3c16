"""`fdl diagnose` checks and the `fdl setup` plan, with a FakeRunner and fake trees."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fdl.compat import parse_capability
from fdl.diagnose import Severity, run_diagnose
from fdl.libtorch import VariantInfo, finish_info, plan_setup, variants
from fdl.paths import Context
from fdl.runner import Completed
from tests.support.fakes import FakeRunner
from tests.support.libtorch_trees import make_tree

SMI = ["nvidia-smi", "--query-gpu=index,name,compute_cap,memory.total,driver_version"]


def smi_lines(*caps: str, driver: str = "580.65") -> str:
    return "".join(f"{i}, NVIDIA Test GPU {c}, {c}, 8192, {driver}\n" for i, c in enumerate(caps))


def runner(*caps: str, nvcc: str | None = None, gcc: str = "12.2.0") -> FakeRunner:
    responses = {
        tuple(SMI): Completed([], 0, smi_lines(*caps)),
        ("gcc", "--version"): Completed([], 0, f"gcc (Debian {gcc}-14) {gcc}\n"),
        ("g++", "--version"): Completed([], 0, f"g++ (Debian {gcc}-14) {gcc}\n"),
        ("cmake", "--version"): Completed([], 0, "cmake version 3.25.1\n"),
    }
    programs = {"gcc": "/usr/bin/gcc", "g++": "/usr/bin/g++", "cmake": "/usr/bin/cmake"}
    if caps:
        programs["nvidia-smi"] = "/usr/bin/nvidia-smi"
    if nvcc:
        programs["nvcc"] = "/usr/local/cuda/bin/nvcc"
        responses[("nvcc", "--version")] = Completed(
            [], 0, f"Cuda compilation tools, release {nvcc}, V{nvcc}.88\n"
        )
        responses[("nvcc", "--list-gpu-code")] = Completed([], 1, "")
    return FakeRunner(responses, programs)


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path, project=True)


def install_fake(context: Context, name: str, version: str, cuda: str | None, cubins=()) -> None:
    path = make_tree(context.libtorch_dir / name, version, cubins=cubins, cuda_needed=())
    info = VariantInfo(
        name=name, torch=version.split("+", maxsplit=1)[0], cuda=cuda, source={"kind": "download"}
    )
    variants.write_info(path, finish_info(path, info))


def find(diagnosis, group: str, name: str):
    return next(c for c in diagnosis.checks if c.group == group and c.name == name)


def test_uncovered_gpu_of_the_active_variant(context: Context) -> None:
    install_fake(
        context, "precompiled/cu130", "2.14.1+cu130", "13.0", cubins=[75, 80, 86, 90, 100, 120]
    )
    variants.activate(context, "precompiled/cu130")
    result = run_diagnose(context, runner=runner("12.0", "6.1"), environ={}, docker=False)
    check = find(result, "libtorch", "GPU 1")
    assert check.severity is Severity.ERROR
    assert "GPU 1 (Test GPU 6.1, sm_61) is not covered by precompiled/cu130" in check.message
    # the fix builds the active variant's release (2.14.1, older than the newest known)
    assert check.fix == "fdl libtorch build --archs 6.1,12.0 --torch 2.14.1"
    assert find(result, "libtorch", "GPU 0").severity is Severity.OK
    data = result.to_json()
    assert [g["sm"] for g in data["gpus"]] == ["sm_120", "sm_61"]
    assert data["libtorch"]["active"] == "precompiled/cu130"
    assert data["summary"]["error"] >= 1


def test_json_has_the_keys_flodl_users_script_against(context: Context) -> None:
    """floDl's docs/cli.md gates CI on `fdl diagnose --json | jq -e '.cuda.devices | length
    > 0'` and reads `.cuda.devices[] | .sm`; its CLI also emits `system`,
    `gpus[].vram_bytes`/`arch_compatible` and `libtorch.path/version/cuda/archs/source`
    (issue 34, point 8)."""
    install_fake(
        context, "precompiled/cu130", "2.14.1+cu130", "13.0", cubins=[75, 80, 86, 90, 100, 120]
    )
    variants.activate(context, "precompiled/cu130")
    data = run_diagnose(context, runner=runner("12.0", "6.1"), environ={}, docker=False).to_json()
    devices = data["cuda"]["devices"]
    assert len(devices) > 0 and [d["sm"] for d in devices] == ["sm_120", "sm_61"]
    assert data["cuda"]["driver"] == "580.65"
    assert [d["arch_compatible"] for d in devices] == [True, False]
    assert devices[0]["vram_bytes"] == 8192 * 1024 * 1024
    assert {"os", "cpu", "threads", "ram_gb"} <= set(data["system"])
    libtorch = data["libtorch"]
    assert (libtorch["path"], libtorch["version"], libtorch["cuda"]) == (
        "precompiled/cu130",
        "2.14.1",
        "13.0",
    )
    # recorded as fdl 0.5 recorded an official zip ("download"): read as its source, archive
    assert libtorch["source"] == "archive" and "12.0" in libtorch["archs"].split()
    # On a CPU machine the gate finds an empty list, not a missing key.
    cpu_only = run_diagnose(context, runner=runner(), environ={}, docker=False).to_json()
    assert cpu_only["cuda"]["devices"] == []


def test_no_active_variant_points_to_setup(context: Context) -> None:
    result = run_diagnose(context, runner=runner(), environ={}, docker=False)
    check = find(result, "libtorch", "active")
    assert check.severity is Severity.WARNING and check.fix == "fdl setup"
    assert find(result, "gpus", "gpus").severity is Severity.INFO
    assert result.worst is Severity.WARNING


def test_active_pointing_nowhere_is_an_error(context: Context) -> None:
    install_fake(context, "precompiled/cpu", "2.13.0+cpu", None)
    variants.activate(context, "precompiled/cpu")
    (context.libtorch_dir / ".active").write_text("builds/gone\n")
    result = run_diagnose(context, runner=runner(), environ={}, docker=False)
    assert find(result, "libtorch", "active").severity is Severity.ERROR


def test_cpu_variant_with_gpus_is_a_warning(context: Context) -> None:
    install_fake(context, "precompiled/cpu", "2.13.0+cpu", None)
    variants.activate(context, "precompiled/cpu")
    result = run_diagnose(context, runner=runner("8.6"), environ={}, docker=False)
    check = find(result, "libtorch", "GPU 0")
    assert check.severity is Severity.WARNING
    assert check.fix == "fdl libtorch download --cuda 13.0 --torch 2.13.0"


def test_nvcc_13_cannot_build_for_pascal(context: Context) -> None:
    result = run_diagnose(
        context, runner=runner("6.1", "12.0", nvcc="13.0"), environ={}, docker=False
    )
    check = find(result, "toolchain", "nvcc archs")
    assert check.severity is Severity.WARNING and "sm_61" in check.message
    assert "12.9 or 12.8" in (check.fix or "")


def test_gcc_too_new_for_nvcc(context: Context) -> None:
    result = run_diagnose(
        context, runner=runner("8.6", nvcc="12.4", gcc="14.2.0"), environ={}, docker=False
    )
    check = find(result, "toolchain", "host compiler")
    assert check.severity is Severity.WARNING and "gcc <= 13" in check.message


# --- setup plans ---------------------------------------------------------------------------


def caps(*texts: str):
    return tuple(parse_capability(t) for t in texts)


def test_setup_on_a_cpu_machine_downloads_and_activates_cpu(context: Context) -> None:
    plan = plan_setup(context, ())
    assert plan.action == "download"
    assert plan.command[:4] == ("fdl", "libtorch", "download", "--cpu")


def test_setup_for_mixed_gpus_describes_the_build(context: Context) -> None:
    plan = plan_setup(context, caps("6.1", "12.0"))
    assert plan.action == "build"
    assert plan.command == ("fdl", "libtorch", "build", "--archs", "6.1,12.0")
    assert any("--cuda 13.2" in a and "sm_120 only" in a for a in plan.alternatives)


def test_setup_keeps_an_active_variant_that_fits(context: Context) -> None:
    install_fake(context, "precompiled/cu130", "2.14.1+cu130", "13.0", cubins=[120])
    variants.activate(context, "precompiled/cu130")
    assert plan_setup(context, caps("12.0")).action == "keep"
    assert plan_setup(context, caps("12.0"), force=True).action == "download"


def test_setup_activates_an_installed_build_that_fits(context: Context) -> None:
    install_fake(context, "builds/sm61-sm120", "2.14.1", "12.8", cubins=[61, 120])
    plan = plan_setup(context, caps("6.1", "12.0"))
    assert (plan.action, plan.variant) == ("activate", "builds/sm61-sm120")


def test_setup_from_wheel(context: Context) -> None:
    plan = plan_setup(context, caps("12.0"), from_wheel=True, torch="2.14")
    assert plan.action == "wheel"
    assert plan.command == ("fdl", "libtorch", "install", "--from-wheel", "--torch", "2.14.1")


def test_a_gpu_the_driver_does_not_support_is_an_error_on_its_own_line() -> None:
    """Before any variant is installed: sm_120 on driver 560 is not `ok` (no CUDA runs on it
    before R570); the GTX 1060 beside it is."""
    from fdl.diagnose.checks import gpu_checks
    from fdl.system import Gpu, GpuReport

    rig = GpuReport(
        (
            Gpu(0, "NVIDIA GeForce GTX 1060 6GB", parse_capability("6.1"), 6144, "560.35.03"),
            Gpu(1, "NVIDIA GeForce RTX 5060 Ti", parse_capability("12.0"), 16384, "560.35.03"),
        ),
        "560.35.03",
    )
    first, second = gpu_checks(rig)[:2]
    assert first.severity is Severity.OK
    assert second.severity is Severity.ERROR
    assert "sm_120 (Blackwell) needs driver >= 570" in second.message
    assert (second.fix or "").startswith("upgrade the NVIDIA driver to 570 or newer")
    on_570 = replace(rig, driver="570.86")
    assert all(c.severity is Severity.OK for c in gpu_checks(on_570)[:2])
