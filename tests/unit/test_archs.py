"""Arch lists: every form users write, the renderings PyTorch and nvcc expect, clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdl.compat import Capability, Kind, Target, known_capabilities, parse_archs, parse_capability
from fdl.errors import UsageError


@pytest.mark.parametrize(
    ("spec", "arch_list"),
    [
        ("6.1;12.0", "6.1;12.0"),
        ("6.1,12.0", "6.1;12.0"),
        ("sm_61,sm_120", "6.1;12.0"),
        ("61 120", "6.1;12.0"),
        ("  6.1 ;\t12.0  ", "6.1;12.0"),
        ("12.0;6.1;6.1", "6.1;12.0"),
        ("12.0a", "12.0a"),
        ("10.0f", "10.0f"),
        ("sm_90a", "9.0a"),
        ("12.0+PTX", "12.0+PTX"),
        ("12.0+ptx", "12.0+PTX"),
        ("sm_120+PTX", "12.0+PTX"),
        ("compute_120", "12.0+PTX"),
        ("6.1(6.0)", "6.1(6.0)"),
        ("Pascal", "6.0;6.1"),
        ("pascal+PTX", "6.0;6.1+PTX"),
        ("BLACKWELL", "10.0;12.0"),
        ("Ampere+Tegra", "8.7"),
        ("sm61-sm120-ptx120", "6.1;12.0+PTX"),
        (["6.1", "12.0"], "6.1;12.0"),
    ],
)
def test_every_user_form_parses(spec: str | list[str], arch_list: str) -> None:
    assert parse_archs(spec).torch_cuda_arch_list() == arch_list


def test_gencode_flags_are_exactly_pytorchs() -> None:
    archs = parse_archs("6.1;12.0+PTX")
    assert archs.gencode() == (
        "-gencode arch=compute_61,code=sm_61 -gencode arch=compute_120,code=sm_120 "
        "-gencode arch=compute_120,code=compute_120"
    )
    assert archs.gencode_flags()[:2] == ["-gencode", "arch=compute_61,code=sm_61"]


@pytest.mark.parametrize(
    ("spec", "gencode"),
    [
        ("6.1(6.0)", "-gencode arch=compute_60,code=sm_61"),
        ("9.0a", "-gencode arch=compute_90a,code=sm_90a"),
        ("10.0f", "-gencode arch=compute_100f,code=sm_100f"),
        ("compute_120", "-gencode arch=compute_120,code=compute_120"),
        (
            "Pascal+PTX",
            "-gencode arch=compute_60,code=sm_60 -gencode arch=compute_61,code=sm_61 "
            "-gencode arch=compute_61,code=compute_61",
        ),
    ],
)
def test_gencode_special_forms(spec: str, gencode: str) -> None:
    assert parse_archs(spec).gencode() == gencode


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("6.1;12.0", "sm61-sm120"),
        ("12.0+PTX", "sm120-ptx120"),
        ("9.0a", "sm90a"),
        ("6.1(6.0)", "sm61v60"),
    ],
)
def test_directory_names(spec: str, name: str) -> None:
    assert parse_archs(spec).dir_name() == name


def test_codes_and_capabilities() -> None:
    archs = parse_archs("12.0+PTX;6.1")
    assert archs.codes() == ["sm_61", "sm_120", "compute_120"]
    assert archs.capabilities == (Capability(6, 1), Capability(12, 0))
    assert Capability(12, 0).sm == "sm_120"
    assert Capability(6, 1).label() == "sm_61 (Pascal)"


@pytest.mark.parametrize(
    ("spec", "quoted"),
    [
        ("6.1;8.5", "'8.5'"),
        ("6.1;xyz", "'xyz'"),
        ("7", "'7'"),
        ("6.1;8.0a", "'8.0a'"),
        ("9.0f", "'9.0f'"),
        ("sm_61a", "'sm_61a'"),
        ("6.10", "'6.10'"),
        ("compute_61(6.0)", "'compute_61(6.0)'"),
    ],
)
def test_bad_entries_are_quoted_in_a_usage_error(spec: str, quoted: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_archs(spec)
    assert quoted in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("word", ["Auto", "common", "ALL"])
def test_pytorch_magic_words_are_refused_with_the_reason(word: str) -> None:
    with pytest.raises(UsageError, match=word):
        parse_archs(word)


def test_empty_list_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no GPU architectures"):
        parse_archs(" ; , ")


def test_parse_capability_forms() -> None:
    assert parse_capability("6.1") == parse_capability("61") == parse_capability("sm_61")
    with pytest.raises(UsageError):
        parse_capability("sm_90a")


_targets = st.builds(
    lambda cap, kind, suffix: Target(cap, kind, suffix if cap >= Capability(10, 0) else ""),
    st.sampled_from(known_capabilities()),
    st.sampled_from(list(Kind)),
    st.sampled_from(["", "a", "f"]),
)


@given(st.lists(_targets, min_size=1, max_size=6))
def test_rendering_round_trips(targets: list[Target]) -> None:
    from fdl.compat import ArchList

    archs = ArchList.of(targets)
    # PTX-only targets render as "X.Y+PTX" (PyTorch cannot ask for PTX alone): a superset
    again = parse_archs(archs.torch_cuda_arch_list())
    assert set(archs.targets) <= set(again.targets)
    assert parse_archs(archs.dir_name()) == archs
    assert parse_archs(" ".join(archs.codes())) == archs
