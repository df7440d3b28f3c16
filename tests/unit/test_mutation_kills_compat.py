"""NVIDIA's compatibility rules at their edges, with the reason each verdict gives: what the
mutation run (scripts/mutation.py) found no test held (equal capabilities, the `a` and `f`
suffixes of PTX, which of several usable targets is named, the reasons' words)."""

from __future__ import annotations

import pytest

from fdl.compat.archs import parse_archs
from fdl.compat.rules import runs_on


@pytest.mark.parametrize(
    ("archs", "gpu", "match", "target"),
    [
        ("compute_80", "8.0", "ptx", "compute_80"),  # PTX at exactly the GPU's capability
        ("compute_80", "7.5", "none", None),
        ("compute_90a", "9.0", "ptx", "compute_90a"),
        ("compute_90a", "10.0", "none", None),
        ("compute_100f", "10.0", "ptx", "compute_100f"),  # its own capability, then its family
        ("compute_100f", "10.3", "ptx", "compute_100f"),
        ("compute_100f", "12.0", "none", None),
        ("sm_100f", "10.0", "native", "sm_100f"),
        ("sm_100f", "10.3", "compatible", "sm_100f"),
        # the newest PTX and the cubin of the highest minor are the ones named
        ("sm_70 sm_75 compute_70 compute_80", "8.6", "ptx", "compute_80"),
        ("compute_80 compute_70", "9.0", "ptx", "compute_80"),
        ("sm_80 sm_86", "8.9", "compatible", "sm_86"),
        ("sm_86 sm_80", "8.9", "compatible", "sm_86"),
    ],
)
def test_the_best_target_that_runs_is_named(
    archs: str, gpu: str, match: str, target: str | None
) -> None:
    verdict = runs_on(parse_archs(archs), gpu)
    assert verdict.match.value == match
    assert (verdict.target.code if verdict.target else None) == target


@pytest.mark.parametrize(
    ("archs", "gpu", "reason"),
    [
        ("sm_80", "8.0", "native cubin sm_80"),
        ("sm_80", "8.6", "compatible cubin sm_80 runs on 8.6 (same major, older minor)"),
        ("sm_90a", "9.0", "arch-specific cubin sm_90a (only kernels built for it)"),
        (
            "compute_80",
            "9.0",
            "PTX compute_80 is JIT-compiled by the driver for 9.0 (slow first start)",
        ),
        (
            "sm_90 sm_100",
            "8.6",
            "no code for sm_86 (Ampere): needs a cubin for 8.x at or below 8.6 or PTX at or "
            "below 8.6; has sm_90 sm_100",
        ),
    ],
)
def test_each_verdict_says_why(archs: str, gpu: str, reason: str) -> None:
    assert runs_on(parse_archs(archs), gpu).reason == reason


def test_no_code_at_all_says_so() -> None:
    verdict = runs_on([], "8.6")
    assert not verdict.ok
    assert verdict.reason.endswith("; has no GPU code")
