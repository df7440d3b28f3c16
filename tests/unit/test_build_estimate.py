"""The build estimate: wall time and peak RAM from TU counts, per-target costs and jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.compat import toolkit
from fdl.libtorch.build import (
    BuildEstimate,
    BuildRequest,
    MachineFacts,
    Nvcc,
    Setting,
    estimate_build,
    estimate_table,
    plan_build,
)


def estimate(archs: str = "8.6;12.0", **kw: object) -> BuildEstimate:
    args: dict[str, object] = {
        "torch": "2.10.0",
        "archs": archs,
        "jobs": 8,
        "cores": 8,
        "ram_gb": 64.0,
    }
    args.update(kw)
    return estimate_build(**args)  # type: ignore[arg-type]


def seconds(archs: str = "8.6;12.0", **kw: object) -> float:
    return estimate(archs, **kw).seconds


def test_more_archs_take_longer_each_time() -> None:
    lists = ["12.0", "8.6;12.0", "8.0;8.6;12.0", "8.0;8.6;9.0;12.0", "8.0;8.6;9.0;12.0+PTX"]
    times = [seconds(archs) for archs in lists]
    assert times == sorted(times)
    assert len(set(times)) == len(times)


def test_flash_attention_adds_time_and_memory() -> None:
    on = estimate(flash_attention=True)
    off = estimate(flash_attention=False)
    assert on.seconds > off.seconds
    assert on.peak_gb > off.peak_gb
    assert on.units["flash"] > 0 and off.units["flash"] == 0


def test_flash_kernels_cost_little_on_targets_below_8_0() -> None:
    # PyTorch's flash kernels compile a stub below sm_80: adding 6.1 costs what it costs
    # for a plain .cu, adding 8.6 costs the full kernel.
    base = seconds("12.0")
    with_pascal = seconds("6.1;12.0") - base
    with_ampere = seconds("8.6;12.0") - base
    assert with_ampere > with_pascal > 0


def test_switches_drop_their_units() -> None:
    full = estimate()
    lean = estimate(switches={"USE_DISTRIBUTED": "0", "USE_MEM_EFF_ATTENTION": "OFF"})
    assert lean.units["cxx"] < full.units["cxx"]
    assert lean.units["cuda"] < full.units["cuda"]
    assert lean.seconds < full.seconds
    assert estimate(switches={"USE_FLASH_ATTENTION": "0"}).units["flash"] == 0


def test_jobs_beyond_the_cores_do_not_shorten_the_build() -> None:
    assert seconds(jobs=8, cores=8) < seconds(jobs=4, cores=8)
    assert seconds(jobs=16, cores=8) == seconds(jobs=8, cores=8)


def test_cpu_build_compiles_no_cuda() -> None:
    cpu = estimate("")
    assert cpu.targets == 0 and set(cpu.units) == {"cxx"}
    assert cpu.seconds < seconds("12.0")


def test_memory_warning_names_the_jobs_that_fit() -> None:
    fits = estimate(jobs=4, ram_gb=32.0)
    over = estimate(jobs=8, ram_gb=32.0)
    per_job = over.peak_gb / 8
    assert not fits.over_memory
    assert over.over_memory
    assert over.fits_jobs == int(32 // per_job)
    assert f"MAX_JOBS={over.fits_jobs} fits" in over.summary()
    assert "fits" not in fits.summary()


def test_the_summary_states_its_basis_and_that_it_is_an_estimate() -> None:
    text = estimate().summary()
    assert text.startswith("~") and " on 8 jobs, peak ~" in text
    assert "(basis: " in text and "an estimate)" in text
    assert "TUs of torch 2.10.x" in text


def test_the_table_states_how_it_counted() -> None:
    table = estimate_table()
    for release in table["releases"]:
        assert len(str(release["counted"])) > 100
        assert {"flash", "mem_eff", "cuda", "cxx"} <= set(release)
    assert table["scale"]["flash_source"] and table["scale"]["build_source"]


def test_a_release_newer_than_the_counts_gets_no_estimate_in_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fdl.libtorch.build._estimate as module

    table = dict(estimate_table())
    table["releases"] = [dict(r, until_torch="2.9") for r in table["releases"]]
    monkeypatch.setattr(module, "estimate_table", lambda: table)
    facts = MachineFacts(
        libtorch_dir=tmp_path,
        nvcc=Nvcc("13.0", "13.0.88", "/c/bin/nvcc", toolkit("13.0").targets, "/c"),
        nvcc_reason=None,
        tools={"gcc": "12.2.0", "cmake": "3.28.3", "python3": "3.11.2", "git": "2.39"},
        tool_paths={},
        docker="buildkit",
        docker_reason=None,
        cores=8,
        ram_gb=64.0,
        disk_free_gb=200.0,
    )
    request = BuildRequest(archs=Setting("8.6", "--archs"), torch=Setting("2.10.0", "--torch"))
    plan = plan_build(request, facts)
    assert plan.commands and plan.torch == "2.10.0", plan  # planned, without an estimate
    assert plan.estimate is None
