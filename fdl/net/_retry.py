"""When to try a request again, and how long to wait before it."""

from __future__ import annotations

import random
from dataclasses import dataclass

from fdl._grammar import count

__all__ = ["RETRY_STATUSES", "RetryPolicy", "is_retryable_status", "parse_retry_after"]

# 408 Request Timeout and 429 Too Many Requests are the only 4xx worth repeating.
RETRY_STATUSES = frozenset({408, 429})


def is_retryable_status(status: int) -> bool:
    """True for statuses that a later identical request may not get (5xx, 408, 429)."""
    return status >= 500 or status in RETRY_STATUSES


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded.

    Attributes:
        attempts: Consecutive failed attempts tolerated before giving up. An
            attempt that received data resets the count (a flaky link that
            drops every few hundred MB still finishes), bounded by ``max_attempts``.
        max_attempts: Hard cap on attempts in one download, successful or not.
        base_delay: Seconds before the first retry.
        multiplier: Growth of the delay per consecutive failure.
        max_delay: Upper bound of any delay, including a server's Retry-After.
        jitter: Fraction of the delay removed at random (0 = none, 1 = full
            jitter), so many clients do not retry in lockstep.
    """

    attempts: int = 6
    max_attempts: int = 60
    base_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.max_attempts < 1:
            raise ValueError("attempts and max_attempts must be at least 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("delays must be >= 0 and multiplier >= 1")

    def delay(
        self,
        failures: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        exponent = max(failures - 1, 0)
        # Cap the exponent so large counts cannot overflow a float.
        raw = self.base_delay * self.multiplier ** min(exponent, 64)
        bounded = min(raw, self.max_delay)
        fraction = (rng or random).random()
        return bounded * (1.0 - self.jitter * fraction)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    seconds = count(value)
    if seconds is not None:
        return float(seconds)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    from datetime import datetime, timezone

    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)
