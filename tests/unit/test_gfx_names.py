"""The one parser of AMD GPU target ids (fdl.compat.rocm.parse_gfx), which the offload
reader, the GPU survey, the ROCm tables and --rocm-archs all use."""

from __future__ import annotations

import pytest

from fdl.binaries.offload import OffloadEntry
from fdl.compat.rocm import GfxTarget, gfx_processor, gfx_sort_key, parse_gfx
from fdl.errors import UsageError
from fdl.libtorch.build import parse_rocm_archs
from fdl.system.survey import parse_spoof


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("gfx90a", GfxTarget(9, 0, 10)),
        ("gfx1030", GfxTarget(10, 3, 0)),
        ("gfx942", GfxTarget(9, 4, 2)),
        ("gfx1201", GfxTarget(12, 0, 1)),
        ("gfx908", GfxTarget(9, 0, 8)),
        ("gfx90a:sramecc+:xnack-", GfxTarget(9, 0, 10, ("sramecc+", "xnack-"))),
        ("gfx942:xnack+", GfxTarget(9, 4, 2, ("xnack+",))),
        (" GFX1100 ", GfxTarget(11, 0, 0)),
    ],
)
def test_valid_target_ids(text: str, target: GfxTarget) -> None:
    assert parse_gfx(text) == target
    assert str(target) == text.strip().lower()
    assert gfx_processor(text) == target.processor == text.strip().lower().split(":")[0]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "gfx",
        "gfx90",  # no stepping
        "gfx90g",  # not a hex stepping
        "gfx9010",  # one digit too many
        "gfx0900",
        "gfx90a:xnack",  # a feature without its sign
        "gfx90a:xnack-:sramecc+",  # features out of LLVM's order
        "gfx90a:xnack-:xnack+",
        "gfx90a:foo+",
        "gfx90a;rm -rf /",
        "gfx90a\x00",
        "gfx9-generic",  # generic targets are not processors
        "sm_86",
        "gfx" + "9" * 40,
        "gfx90a" + ":xnack-" * 20,
        "ｇfx90a",
        "gfx٩0a",  # an Arabic-Indic digit
    ],
)
def test_hostile_names_are_not_targets(text: str) -> None:
    assert parse_gfx(text) is None
    assert gfx_processor(text) == ""


def test_every_reader_uses_the_one_parser() -> None:
    # the offload reader: a triple's target id
    entry = OffloadEntry("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", 64, 0)
    assert entry.arch == "gfx90a"
    assert OffloadEntry("hipv4-amdgcn-amd-amdhsa--gfx90a:bogus", 64, 0).arch == ""
    # the survey's spoof: features kept, names normalised, hostile ones refused
    found = parse_spoof('[{"vendor": "amd", "arch": "GFX90A:xnack-"}]')
    assert found.devices[0].arch == "gfx90a:xnack-"
    with pytest.raises(UsageError):
        parse_spoof('[{"vendor": "amd", "arch": "gfx9010"}]')
    # --rocm-archs: processors only, features left to PyTorch
    assert parse_rocm_archs("gfx942;gfx1201") == ("gfx942", "gfx1201")
    with pytest.raises(UsageError):
        parse_rocm_archs("gfx90a:xnack-")
    assert sorted(["gfx1201", "junk", "gfx90a", "gfx908"], key=gfx_sort_key) == [
        "gfx908", "gfx90a", "gfx1201", "junk"
    ]  # fmt: skip
