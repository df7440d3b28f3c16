"""NVIDIA's compatibility rules at their edges, with the reason each verdict gives: what the
mutation run (scripts/mutation.py) found no test held (equal capabilities, the `a` and `f`
suffixes of PTX, which of several usable targets is named, the reasons' words)."""

from __future__ import annotations

import pytest

from fdl.compat.archs import (
    Capability,
    capability_info,
    family_archs,
    parse_archs,
    parse_capability,
)
from fdl.compat.rules import runs_on
from fdl.errors import UsageError


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


FORMS = "write it as 6.1, sm_61, 61, 12.0a, 10.0f, 12.0+PTX, compute_120, 6.1(6.0) or a name"


@pytest.mark.parametrize(
    ("spec", "message", "hint"),
    [
        ("", "no GPU architectures given", "write them as 6.1, sm_61"),
        ("foo", "bad GPU architecture 'foo': not an architecture", FORMS),
        (
            "sm_61 sm_6x",
            "bad GPU architecture 'sm_6x' in 'sm_61 sm_6x': not an architecture",
            FORMS,
        ),
        (
            "sm_61 sm_99",
            "unknown GPU architecture 'sm_99' in 'sm_61 sm_99': no GPU has compute capability 9.9",
            "known capabilities: 3.5 3.7 5.0",
        ),
        ("sm_99", "unknown GPU architecture 'sm_99': no GPU has compute capability 9.9", "known"),
        (
            "sm_61 9.0(9.9)",
            "unknown GPU architecture '9.0(9.9)' in 'sm_61 9.0(9.9)': no GPU has compute "
            "capability 9.9",
            "known capabilities: 3.5 3.7 5.0",
        ),
        ("sm_70a", "bad GPU architecture 'sm_70a': `a` targets exist from 9.0 on", FORMS),
        (
            "sm_61 1.2345",
            "bad GPU architecture '1.2345' in 'sm_61 1.2345': not a capability (write 6.1, 61 "
            "or sm_61)",
            FORMS,
        ),
        (
            "sm_61 compute_86(8.0)",
            "bad GPU architecture 'compute_86(8.0)' in 'sm_61 compute_86(8.0)': the X.Y(A.B) "
            "form takes plain capabilities only",
            FORMS,
        ),
        (
            "PTX_86(8.0)",
            "bad GPU architecture 'PTX_86(8.0)': the X.Y(A.B) form takes plain capabilities only",
            FORMS,
        ),
        (
            "ALL",
            "'ALL' in 'ALL' is not accepted: `All` builds every arch",
            "list the archs explicitly",
        ),
    ],
)
def test_a_refused_architecture_list_names_the_entry_and_the_fix(
    spec: str, message: str, hint: str
) -> None:
    with pytest.raises(UsageError) as caught:
        parse_archs(spec)
    assert caught.value.message.startswith(message)
    assert (caught.value.hint or "").startswith(hint)


def test_a_refused_capability_or_family_says_how_to_write_one() -> None:
    with pytest.raises(UsageError) as caught:
        parse_capability("x")
    assert (caught.value.message, caught.value.hint) == (
        "'x' is not a compute capability",
        "write it as 6.1, 61 or sm_61",
    )
    with pytest.raises(UsageError) as family:
        family_archs("nope")
    assert family.value.message == "unknown architecture name 'nope'"
    assert (family.value.hint or "").startswith("known: Kepler+Tesla, Kepler, Maxwell")


def test_capabilities_are_named_by_generation_when_known() -> None:
    assert capability_info(parse_capability("8.6")) == ("Ampere", "RTX 30xx, A10, A40")
    assert capability_info(Capability(1, 0)) == (None, "")
    assert parse_capability("8.6").label() == "sm_86 (Ampere)"
    assert Capability(1, 0).label() == "sm_10"


def test_targets_sort_and_print_with_their_virtual_architecture() -> None:
    listed = parse_archs("8.6(8.0) 8.6 compute_80 sm_80 9.0a 9.0")
    assert [str(t) for t in listed] == [
        "sm_80",
        "compute_80",
        "sm_86",
        "sm_86(compute_80)",
        "sm_90",
        "sm_90a",
    ]
    assert listed.torch_cuda_arch_list() == "8.0+PTX;8.6;8.6(8.0);9.0;9.0a"
