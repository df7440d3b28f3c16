"""The result of asking the machine something: a value, or why it could not tell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Probe"]

T = TypeVar("T")


@dataclass(frozen=True)
class Probe(Generic[T]):
    """What a probe found.

    Attributes:
        value: The answer, or None when the probe could not tell.
        reason: Why there is no answer (``gcc not found on PATH``); None when found.
        path: The program or file that answered, when there is one.
    """

    value: T | None = None
    reason: str | None = None
    path: str | None = None

    @property
    def found(self) -> bool:
        return self.value is not None

    @classmethod
    def missing(cls, reason: str, path: str | None = None) -> Probe[T]:
        """A probe that found nothing, with the reason."""
        return cls(None, reason, path)
