"""The NCCL table (read from the NCCL wheels on PyPI): which builds serve which GPUs."""

from __future__ import annotations

from fdl.compat.archs import Capability
from fdl.compat.nccl import nccl_wheels, torch_nccl, wheels_covering

RIG = [Capability(6, 1), Capability(12, 0)]


def test_only_cu12_wheels_serve_the_mixed_rig() -> None:
    fitting = wheels_covering(RIG)
    assert fitting, "the table must name a wheel for the GTX 1060 + RTX 5060 Ti rig"
    assert {w.package for w in fitting} == {"nvidia-nccl-cu12"}
    cu13 = [w for w in nccl_wheels() if w.package == "nvidia-nccl-cu13"]
    assert cu13 and all(w.missing(RIG) == [Capability(6, 1)] for w in cu13)


def test_the_torch_pins_are_rows_of_the_wheel_table() -> None:
    for torch in ("2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.1", "2.15.0"):
        wheel = torch_nccl(torch)
        assert wheel is not None, torch
        assert wheel.cubins and len(wheel.sha256) == 64
    assert torch_nccl("2.10.0").package == "nvidia-nccl-cu12"  # type: ignore[union-attr]
    assert torch_nccl("1.0.0") is None and torch_nccl(None) is None


def test_every_wheel_row_is_whole() -> None:
    seen = set()
    for wheel in nccl_wheels():
        assert (wheel.package, wheel.version) not in seen
        seen.add((wheel.package, wheel.version))
        assert wheel.file.startswith(wheel.package.replace("-", "_") + "-" + wheel.version + "-")
        assert all(c.startswith("sm_") for c in wheel.cubins)
