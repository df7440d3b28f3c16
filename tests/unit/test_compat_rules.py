"""Binary compatibility: which GPU runs which code, and why."""

from __future__ import annotations

import pytest

from fdl.compat import Match, parse_archs, runs_on


@pytest.mark.parametrize(
    ("targets", "gpu", "match", "code"),
    [
        ("6.1;12.0", "6.1", Match.NATIVE, "sm_61"),
        ("6.0;7.0", "6.1", Match.COMPATIBLE, "sm_60"),
        ("6.0;6.1", "6.2", Match.COMPATIBLE, "sm_61"),
        ("12.0", "12.1", Match.COMPATIBLE, "sm_120"),
        ("7.5;12.0+PTX", "12.1", Match.COMPATIBLE, "sm_120"),
        ("7.5;9.0+PTX", "12.0", Match.PTX, "compute_90"),
        ("compute_80", "8.6", Match.PTX, "compute_80"),
        ("9.0a", "9.0", Match.ARCH_SPECIFIC, "sm_90a"),
        ("10.0f", "10.3", Match.COMPATIBLE, "sm_100f"),
        ("10.0f", "10.0", Match.NATIVE, "sm_100f"),
        ("12.0;12.1a", "12.1", Match.COMPATIBLE, "sm_120"),
    ],
)
def test_code_that_runs(targets: str, gpu: str, match: Match, code: str) -> None:
    verdict = runs_on(parse_archs(targets), gpu)
    assert verdict.ok
    assert verdict.match is match
    assert verdict.target is not None and verdict.target.code == code
    assert code in verdict.reason


@pytest.mark.parametrize(
    ("targets", "gpu"),
    [
        ("7.0;7.5;8.0;8.6;8.9;9.0;12.0", "6.1"),  # the reference CLI's substring bug: "6" in "8.6"
        ("6.1", "6.0"),  # a newer-minor cubin does not run on an older minor
        ("7.5", "8.0"),  # cubins never cross majors
        ("12.0", "10.0"),
        ("9.0a", "10.0"),  # arch-specific: exactly that GPU
        ("compute_90a", "10.0"),
        ("10.0f", "12.0"),  # family: same major only
        ("compute_100f", "12.0"),
        ("compute_120", "8.6"),  # PTX only runs on newer GPUs
    ],
)
def test_code_that_does_not_run(targets: str, gpu: str) -> None:
    verdict = runs_on(parse_archs(targets), gpu)
    assert not verdict.ok
    assert verdict.match is Match.NONE
    assert "no code for" in verdict.reason


def test_native_beats_compatible_beats_ptx() -> None:
    assert runs_on(parse_archs("8.0;8.6+PTX"), "8.6").match is Match.NATIVE
    assert runs_on(parse_archs("8.0;compute_86"), "8.6").match is Match.COMPATIBLE
