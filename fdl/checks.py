"""What a check reports (shared by `fdl diagnose` and `fdl libtorch verify`): the fix too."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Check", "Severity", "count", "worst"]


class Severity(str, Enum):
    """How much a check's finding matters, mildest first."""

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


@dataclass(frozen=True)
class Check:
    """One finding.

    Attributes:
        group: Where it belongs (``system``, ``gpus``, ``toolchain``, ``libtorch``).
        name: What was checked (``GPU 1``, ``nvcc``, ``active variant``).
        severity: ok, info, warning or error.
        message: What was found, one line.
        fix: For a problem: what to run or change.
        data: Machine-readable details for ``--json``.
    """

    group: str
    name: str
    severity: Severity
    message: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def problem(self) -> bool:
        return self.severity in (Severity.WARNING, Severity.ERROR)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
            "data": self.data,
        }


def worst(checks: Iterable[Check]) -> Severity:
    """The most severe finding (OK when there is none)."""
    return max((c.severity for c in checks), key=lambda s: s.rank, default=Severity.OK)


def count(checks: Iterable[Check]) -> dict[str, int]:
    """How many findings of each severity: ``{"ok": 5, "info": 2, "warning": 1, "error": 0}``."""
    result = {s.value: 0 for s in Severity}
    for check in checks:
        result[check.severity.value] += 1
    return result
