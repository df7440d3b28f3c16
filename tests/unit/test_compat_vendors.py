"""The variant -> vendor rule (floDl 0.8.0's basename convention, fdl's recorded facts first)."""

from __future__ import annotations

import pytest

from fdl.compat.vendors import classify_variant_label, vendor_of_variant


@pytest.mark.parametrize(
    ("name", "vendor"),
    [
        # flodl-hw-0.8.0/src/vendor.rs:325-339, the reference's own table
        ("cpu", "cpu"),
        ("precompiled/cpu", "cpu"),
        ("cpu-static", "cpu"),
        ("precompiled/cu128", "nvidia"),
        ("builds/sm61-sm120", "nvidia"),
        ("precompiled/cu126-pt27", "nvidia"),
        ("precompiled/rocm70", "amd"),
        ("builds/gfx1030", "amd"),
        ("builds/gfx", None),
        ("builds/mybuild", None),
        ("builds/cpux", None),
        ("", None),
    ],
)
def test_the_basename_is_read_as_the_reference_reads_it(name: str, vendor: str | None) -> None:
    assert classify_variant_label(name) == vendor


def test_without_facts_the_name_decides_and_an_unknown_name_is_nvidia() -> None:
    assert vendor_of_variant("precompiled/rocm71") == "amd"
    assert vendor_of_variant("precompiled/cpu") == "cpu"
    assert vendor_of_variant("builds/mybuild") == "nvidia"


def test_fdl_variant_json_decides_before_a_user_chosen_name() -> None:
    cuda = {"cuda": "12.8", "archs_found": {"cubin": ["sm_61", "sm_120"], "ptx": []}}
    assert vendor_of_variant("builds/pascal-blackwell", cuda) == "nvidia"
    cpu = {"cuda": None, "archs_found": {}, "archs_requested": []}
    assert vendor_of_variant("builds/mybuild", cpu) == "cpu"
    # a CUDA-named directory whose binaries hold no CUDA is a CPU build
    assert vendor_of_variant("precompiled/cu128", cpu) == "cpu"


def test_floDl_arch_file_facts_are_read() -> None:
    rocm = {"cuda": "none", "archs": "gfx908 gfx90a gfx1100", "variant": "rocm7.0"}
    assert vendor_of_variant("precompiled/rocm70", rocm) == "amd"
    assert vendor_of_variant("precompiled/mine", rocm) == "amd"
    nvidia = {"cuda": "12.8", "archs": "7.0 12.0", "variant": "cu128"}
    assert vendor_of_variant("precompiled/mine", nvidia) == "nvidia"
    cpu = {"cuda": "none", "archs": "cpu", "variant": "cpu"}
    assert vendor_of_variant("precompiled/mine", cpu) == "cpu"


def test_an_amd_name_stays_amd_when_the_facts_only_say_no_cuda() -> None:
    assert vendor_of_variant("precompiled/rocm70", {"cuda": None}) == "amd"
    assert vendor_of_variant("builds/x", {"cuda": None, "extra": {"rocm": "7.0"}}) == "amd"
