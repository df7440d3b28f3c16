"""Which official libtorch build fits a set of GPUs, and what to say when none does."""

from __future__ import annotations

import pytest

from fdl.compat import default_torch_version, parse_capability
from fdl.errors import UsageError
from fdl.libtorch import build_command, coverage_fix, select_variant


def caps(*texts: str):
    return [parse_capability(t) for t in texts]


@pytest.mark.parametrize(
    ("gpus", "variant", "covers_all", "uncovered"),
    [
        # GTX 1060 + RTX 5060 Ti: no official build has both; cu130 serves the newer GPU
        (("6.1", "12.0"), "cu132", False, ["sm_61"]),
        # P100 + V100: cu126 has native sm_60 and sm_70 (the reference said "pre-Volta")
        (("6.0", "7.0"), "cu126", True, []),
        (("12.0",), "cu132", True, []),
        # DGX Spark: the sm_120 cubin runs on 12.1 (same major, older minor)
        (("12.1",), "cu132", True, []),
        ((), "cpu", True, []),
        # Ada + Pascal: compatible cubins sm_86 and sm_60 in cu126
        (("8.9", "6.1"), "cu126", True, []),
        (("10.0",), "cu132", True, []),
    ],
)
def test_detected_selection(gpus, variant, covers_all, uncovered) -> None:
    selection = select_variant(caps(*gpus))
    assert selection.variant == variant
    assert selection.how == "detected"
    assert selection.covers_all is covers_all
    assert [c.sm for c in selection.uncovered] == uncovered
    # 2.15 has no CUDA 12.6 build: GPUs only cu126 covers get 2.14.1, the newest that has one
    newest = "2.14.1" if variant == "cu126" else default_torch_version()
    assert selection.torch_version == newest


def test_mixed_gpus_say_so_and_suggest_a_build() -> None:
    selection = select_variant(caps("6.1", "12.0"))
    assert "no official PyTorch" in selection.reason
    assert selection.build == ("fdl", "libtorch", "build", "--archs", "6.1,12.0")
    assert any("fdl libtorch build --archs 6.1,12.0" in w for w in selection.warnings)
    data = selection.to_json()
    assert data["covers_all_gpus"] is False
    assert data["build_command"] == "fdl libtorch build --archs 6.1,12.0"


def test_requested_variant_is_kept_and_warns_about_gpus_it_misses() -> None:
    selection = select_variant(caps("6.1"), cuda="13.0")
    assert (selection.variant, selection.how, selection.cuda) == ("cu130", "requested", "13.0")
    assert not selection.covers_all
    assert any("sm_61" in w for w in selection.warnings)


def test_cpu_with_gpus_warns_that_they_are_unused() -> None:
    selection = select_variant(caps("8.6"), cpu=True)
    assert selection.variant == "cpu"
    assert not selection.covers_all
    assert any("does not use the GPUs" in w for w in selection.warnings)


def test_torch_version_selects_that_release() -> None:
    selection = select_variant(caps("6.1"), torch="2.7")
    assert selection.torch_version == "2.7.1"
    assert selection.variant in ("cu118", "cu126")
    assert selection.build_version.startswith("2.7.1+cu")


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"cpu": True, "cuda": "12.8"}, "mutually exclusive"),
        ({"cuda": "12.8", "torch": "2.14"}, "no official cu128 build"),
        ({"cuda": "99.1"}, "unknown CUDA version"),
        ({"torch": "1.0"}, "unknown PyTorch version"),
    ],
)
def test_bad_requests_are_usage_errors(kwargs, text) -> None:
    with pytest.raises(UsageError) as info:
        select_variant([], **kwargs)
    assert text in info.value.message


def test_manifest_preference_is_used_unless_auto() -> None:
    assert select_variant(caps("12.0"), preferred="cpu").variant == "cpu"
    assert select_variant(caps("12.0"), preferred="cpu").how == "manifest"
    assert select_variant(caps("12.0"), preferred="auto").variant == "cu132"


@pytest.mark.parametrize(
    ("gpus", "torch"), [(("6.1", "12.0"), "2.10.0"), (("12.0",), None), (("12.0",), "2.10.0")]
)
def test_a_driver_older_than_a_gpus_floor_is_the_reason(gpus, torch) -> None:
    """sm_120 on driver 560: no CUDA runs on it before R570. The plan is the one for driver
    570 (the same as on 570), led by the driver, never a CPU build or an "older CUDA"."""
    old = select_variant(caps(*gpus), torch=torch, driver="560.35.03")
    floor = select_variant(caps(*gpus), torch=torch, driver="570")
    assert (old.torch_version, old.variant, old.build, old.build_cuda) == (
        floor.torch_version,
        floor.variant,
        floor.build,
        floor.build_cuda,
    )
    assert old.reason.startswith("sm_120 (Blackwell) needs driver >= 570")
    assert old.warnings[0].startswith("sm_120 (Blackwell) needs driver >= 570")
    assert "upgrade the NVIDIA driver to 570 or newer" in old.warnings[0]
    assert old.driver_problem == old.warnings[0]
    assert not any("CPU build" in w or "older --cuda" in w for w in old.warnings)
    assert floor.driver_problem is None


def test_a_release_passed_over_for_the_driver_says_so() -> None:
    # 2.15.0 has sm_120 builds, all CUDA 13 (driver >= 580): the driver is why 2.11 is chosen
    selection = select_variant(caps("12.0"), driver="570.86")
    assert "has no official build for sm_120 that driver 570.86 runs" in selection.reason


def test_old_driver_rules_out_cuda_13() -> None:
    selection = select_variant(caps("8.6"), driver="550.54")
    assert selection.variant == "cu126"


def test_coverage_fix_prefers_a_download_else_a_build() -> None:
    assert coverage_fix(caps("6.0", "7.0")) == "fdl libtorch download --cuda 12.6"
    assert coverage_fix(caps("6.1", "12.0")) == "fdl libtorch build --archs 6.1,12.0"
    assert build_command(caps("12.0", "6.1"), "2.13.0")[-2:] == ("--torch", "2.13.0")
