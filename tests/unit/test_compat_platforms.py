"""(torch release x GPU set x platform) -> the official build, or the advice: the table of
issue 13's platform and release rules (2.15 without Pascal, 2.0-2.3, Linux arm64, macOS)."""

from __future__ import annotations

import pytest

from fdl.compat import parse_capability, release, releases
from fdl.libtorch._select import select_variant

X86, ARM, MAC = "linux-x86_64", "linux-arm64", "macos-arm64"


def _select(gpus: list[str], torch: str | None, platform: str = X86):  # type: ignore[no-untyped-def]
    return select_variant([parse_capability(g) for g in gpus], torch=torch, platform=platform)


@pytest.mark.parametrize(
    ("gpus", "torch", "platform", "expected"),
    [
        # x86_64: 2.15 has no Pascal/Volta build; unpinned, the newest release that has one
        (["6.1"], None, X86, ("2.14.1", "cu126")),
        (["7.0"], None, X86, ("2.14.1", "cu126")),
        (["12.0"], None, X86, ("2.15.0", "cu132")),
        (["9.0"], None, X86, ("2.15.0", "cu132")),
        # 2.0-2.3: every CUDA build has sm_60 code (runs on sm_61); 2.0's cu117 has Kepler
        (["6.1"], "2.1", X86, ("2.1.2", "cu121")),
        (["3.7"], "2.0", X86, ("2.0.1", "cu117")),
        (["6.1"], "2.3.1", X86, ("2.3.1", "cu121")),
        # Linux arm64: the PyPI aarch64 wheel is CPU up to 2.10, CUDA 13 from 2.11
        (["9.0"], None, ARM, ("2.15.0", "cu132")),  # GH200
        (["12.1"], None, ARM, ("2.15.0", "cu132")),  # GB10: the sm_120 cubin runs on 12.1
        (["11.0"], "2.14", ARM, ("2.14.1", "cu130")),  # Jetson Thor
        (["9.0"], "2.10", ARM, ("2.10.0", "cpu")),
        ([], "2.9", ARM, ("2.9.1", "cpu")),
        (["8.6"], None, MAC, ("2.15.0", "cpu")),
    ],
)
def test_the_build_for_a_release_gpus_and_platform(
    gpus: list[str], torch: str | None, platform: str, expected: tuple[str, str]
) -> None:
    chosen = _select(gpus, torch, platform)
    assert (chosen.torch_version, chosen.variant) == expected


def test_pascal_without_a_torch_says_why_the_older_release() -> None:
    chosen = _select(["6.1"], None)
    assert "torch 2.15.0 has no official build for sm_61" in chosen.reason
    assert "torch 2.14.1 is the newest release with one" in chosen.reason
    assert chosen.covers_all and not chosen.warnings


def test_pascal_with_2_15_pinned_builds_and_names_the_download_that_needs_none() -> None:
    chosen = _select(["6.1"], "2.15")
    assert chosen.torch_version == "2.15.0" and not chosen.covers_all
    assert chosen.build == ("fdl", "libtorch", "build", "--archs", "6.1")  # 2.15 is the newest
    assert chosen.build_cuda == "12.9"  # 13.x cannot compile sm_61
    assert any(
        "torch 2.14.1's official cu126 build runs on sm_61 (fdl libtorch download --torch 2.14.1)"
        in w
        for w in chosen.warnings
    )


def test_mixed_pascal_and_blackwell_stays_on_the_newest_release_and_builds() -> None:
    chosen = _select(["6.1", "12.0"], None)
    assert (chosen.torch_version, chosen.build_cuda) == ("2.15.0", "12.9")
    assert chosen.build[:5] == ("fdl", "libtorch", "build", "--archs", "6.1,12.0")


def test_arm64_before_2_11_names_the_first_release_with_a_cuda_wheel() -> None:
    chosen = _select(["9.0"], "2.10", ARM)
    assert any(
        "torch 2.11.0's official cu130 build runs on sm_90 "
        "(fdl libtorch install --from-wheel --torch 2.11.0)" in w
        for w in chosen.warnings
    )


def test_macos_gets_no_cuda_build_advice() -> None:
    chosen = _select(["8.6"], None, MAC)
    assert chosen.build == () and chosen.warnings == (
        "the CPU build does not use the GPUs (sm_86)",
    )


@pytest.mark.parametrize("platform", [ARM, MAC])
def test_an_x86_build_is_never_offered_on_another_platform(platform: str) -> None:
    for rel in releases():
        names = {v.name for v in rel.variants_on(platform)}
        for gpus in (["9.0"], ["12.0"], ["6.1"], ["8.0", "12.1"], []):
            chosen = _select(gpus, rel.latest, platform)
            assert chosen.variant in names, (rel.version, gpus, platform, chosen.variant)


def test_a_variant_asked_for_that_the_platform_lacks_is_refused() -> None:
    from fdl.errors import UsageError

    with pytest.raises(UsageError, match="no official cu126 build for linux-arm64"):
        select_variant([], torch="2.14.1", cuda="12.6", platform=ARM)
    assert release("2.14.1").variant("cu126").cuda == "12.6"  # x86_64 has it
