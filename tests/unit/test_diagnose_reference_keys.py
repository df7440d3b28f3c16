"""The keys floDl 0.8.0's `diagnose --json` added (flodl-cli-0.8.0/src/diagnose.rs:195-273):
`system.docker`, `gpus[].vendor`/`arch`, `gpu_notes`, `libtorch.vendor`, and `libtorch: null`
without an active variant; fdl's own keys stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.diagnose import run_diagnose
from fdl.diagnose._reference import docker_fact, gpu_notes
from fdl.libtorch import variants
from fdl.paths import Context
from fdl.runner import Completed
from fdl.system import GpuReport
from tests.unit.test_diagnose import install_fake, runner


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path, project=True)


def test_gpus_carry_vendor_and_arch_and_the_variant_its_vendor(context: Context) -> None:
    install_fake(context, "precompiled/cu130", "2.14.1+cu130", "13.0", cubins=[75, 120])
    variants.activate(context, "precompiled/cu130")
    data = run_diagnose(context, runner=runner("12.0", "6.1"), environ={}, docker=False).to_json()
    assert [(g["vendor"], g["arch"], g["sm"]) for g in data["gpus"]] == [
        ("nvidia", "sm_120", "sm_120"),
        ("nvidia", "sm_61", "sm_61"),
    ]
    assert data["gpu_notes"] == []
    assert data["libtorch"]["vendor"] == "nvidia"
    assert data["libtorch"]["path"] == "precompiled/cu130"
    assert data["libtorch"]["active"] == "precompiled/cu130"  # fdl's keys stay
    assert data["variants"] == {"active": "precompiled/cu130", "installed": ["precompiled/cu130"]}


def test_a_cpu_variant_is_cpu_and_no_variant_is_null(context: Context) -> None:
    install_fake(context, "builds/mine", "2.13.0+cpu", None)
    empty = run_diagnose(context, runner=runner(), environ={}, docker=False).to_json()
    assert empty["libtorch"] is None
    assert empty["variants"] == {"active": None, "installed": ["builds/mine"]}
    assert empty["gpus"] == [] and empty["gpu_notes"] == []
    variants.activate(context, "builds/mine")
    data = run_diagnose(context, runner=runner(), environ={}, docker=False).to_json()
    # the name says nothing; variant.json says no CUDA
    assert data["libtorch"]["vendor"] == "cpu"


def test_a_floDl_rocm_variant_reads_as_amd(context: Context) -> None:
    directory = context.libtorch_dir / "precompiled" / "rocm70"
    (directory / "lib").mkdir(parents=True)
    (directory / ".arch").write_text(
        "cuda=none\ntorch=2.10.0\narchs=gfx908 gfx90a gfx1100\nsource=precompiled\n"
        "variant=rocm7.0\n"
    )
    variants.activate(context, "precompiled/rocm70")
    data = run_diagnose(context, runner=runner(), environ={}, docker=False).to_json()
    assert data["libtorch"]["vendor"] == "amd"


def test_notes_say_why_the_gpu_list_is_empty() -> None:
    failed = GpuReport(reason="nvidia-smi exited with status 9: NVIDIA-SMI has failed")
    assert gpu_notes(failed, driver_loaded=True) == [
        {
            "vendor": "nvidia",
            "kind": "tool_failed",
            "message": "nvidia-smi exited with status 9: NVIDIA-SMI has failed",
        }
    ]
    missing = GpuReport(reason="nvidia-smi not found on PATH (no NVIDIA driver here)")
    [note] = gpu_notes(missing, driver_loaded=True)
    assert note["kind"] == "hardware_unusable" and "NVIDIA utilities" in note["message"]
    assert gpu_notes(missing, driver_loaded=False) == []  # no driver, no card: nothing to say


def test_system_docker_is_container_inside_one_else_the_client_version() -> None:
    assert docker_fact({"FDL_IN_CONTAINER": "1"}, "27.3.1") == "container"
    assert docker_fact({"FDL_IN_CONTAINER": "0"}, "27.3.1") == "27.3.1"
    assert docker_fact({"FDL_IN_CONTAINER": "0"}, None) is None


def test_system_docker_is_read_from_the_client_diagnose_probes(
    context: Context, tmp_path: Path
) -> None:
    """The version comes from the probe the docker checks make (no second one)."""
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    probes = runner()
    version = '{"Client":{"Version":"27.3.1"},"Server":{"Version":"27.3.1"}}'
    probes.responses[(str(fake), "version")] = Completed([], 0, version + "\n")
    probes.programs[str(fake)] = str(fake)
    probes.default = Completed([], 1, "")
    environ = {"FDL_DOCKER": str(fake), "FDL_IN_CONTAINER": "0", "PATH": "/usr/bin:/bin"}
    data = run_diagnose(context, runner=probes, environ=environ).to_json()
    assert data["system"]["docker"] == "27.3.1"
    inside = run_diagnose(
        context, runner=runner(), environ={**environ, "FDL_IN_CONTAINER": "1"}, docker=False
    ).to_json()
    assert inside["system"]["docker"] == "container"


def test_amd_gpus_and_their_notes_come_from_the_kfd_survey(
    context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AMD cards as `fdl probe` finds them (the KFD topology behind floDl's gates): in
    `gpus` with `sm: ""`, covered when the active variant has their gfx target; a card that
    a gate stops is a note. `cuda.devices` stays NVIDIA's."""
    from fdl.diagnose import _reference
    from fdl.system.survey import Device, Note

    directory = context.libtorch_dir / "precompiled" / "rocm70"
    (directory / "lib").mkdir(parents=True)
    (directory / ".arch").write_text("cuda=none\ntorch=2.10.0\narchs=gfx90a gfx1100\n")
    variants.activate(context, "precompiled/rocm70")
    unusable = Note("amd", "hardware_unusable", "1 AMD GPU(s) present (gfx1030) but no ROCm")
    monkeypatch.setattr(
        _reference,
        "amd_gpus",
        lambda environ: ([Device(0, "amd", "AMD GPU gfx90a", "gfx90a", 65536)], [unusable]),
    )
    data = run_diagnose(context, runner=runner("12.0"), environ={}, docker=False).to_json()
    assert [(g["vendor"], g["arch"], g["sm"]) for g in data["gpus"]] == [
        ("nvidia", "sm_120", "sm_120"),
        ("amd", "gfx90a", ""),
    ]
    assert data["gpus"][1]["arch_compatible"] is True
    assert data["gpus"][1]["vram_bytes"] == 65536 * 1024 * 1024
    assert data["gpu_notes"] == [unusable.to_json()]
    assert [d["vendor"] for d in data["cuda"]["devices"]] == ["nvidia"]
    assert data["libtorch"]["vendor"] == "amd"


def test_the_gpus_option_narrows_the_gpus_looked_at(context: Context) -> None:
    """floDl's global --gpus (`fdl --gpus 1 diagnose`): only those devices are checked."""
    install_fake(context, "precompiled/cu130", "2.14.1+cu130", "13.0", cubins=[75, 120])
    variants.activate(context, "precompiled/cu130")
    every = run_diagnose(context, runner=runner("12.0", "6.1"), environ={}, docker=False)
    assert [g["index"] for g in every.to_json()["gpus"]] == [0, 1]
    assert any("sm_61" in c.message and c.severity.name == "ERROR" for c in every.checks)
    one = run_diagnose(
        context, runner=runner("12.0", "6.1"), environ={}, docker=False, visible=(0,)
    )
    assert [g["index"] for g in one.to_json()["gpus"]] == [0]
    assert not any(c.severity.name == "ERROR" and "sm_61" in c.message for c in one.checks)
