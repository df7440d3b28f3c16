"""Needs and fakes for the chooser's tests (tests/unit/test_choose.py and its mutation
kills): the fakes hold only what the offers read of the real objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fdl.libtorch._choose import Need

CU130 = Need("setup", torch="2.14.1", variant="cu130", cuda="13.0", pypi_variant="cu130")
CPU = Need("setup", torch="2.14.1", variant="cpu", pypi_variant="cu130")


@dataclass
class Installed:  # what offers read of a WheelSource
    version: str
    torch_version: str
    variant: str | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Remote:
    manifest: Any


@dataclass
class Match:  # what offers read of a SharedMatch
    remote: Remote

    def reason(self) -> str:
        return "pull r@sha256:0 (built by build, covers sm_120)"
