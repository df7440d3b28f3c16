"""How long a network operation may go without receiving anything: ``FDL_NET_DEADLINE``.

A server that accepts the connection and never answers (or stops answering) would
otherwise keep a download silent for the read timeout of every retry and the backoff
between them, minutes on end. The deadline counts all of it: the time since the last
byte arrived (or since the operation started), across attempts, connection and
backoff included; when it passes, the operation ends in a network error (exit 5).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fdl.errors import NetworkError, UsageError

__all__ = ["DEADLINE_ENV", "DEFAULT_DEADLINE", "deadline_error", "net_deadline"]

DEADLINE_ENV = "FDL_NET_DEADLINE"
DEFAULT_DEADLINE = 300.0


def net_deadline(environ: Mapping[str, str] | None = None) -> float:
    """The deadline in seconds (``$FDL_NET_DEADLINE``, default 300).

    Raises:
        UsageError: the variable is not a positive number.
    """
    text = (os.environ if environ is None else environ).get(DEADLINE_ENV, "").strip()
    if not text:
        return DEFAULT_DEADLINE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(
            f"{DEADLINE_ENV}={text!r} is not a number of seconds",
            hint=f"set it to a positive number, e.g. {DEADLINE_ENV}=600, or unset it "
            f"(default {DEFAULT_DEADLINE:g})",
        )
    return value


def deadline_error(where: str, seconds: float, cause: str | None = None) -> NetworkError:
    """The error of an operation that received nothing for ``seconds``."""
    why = f" (last: {cause})" if cause else ""
    return NetworkError(
        f"{where}: nothing received for {seconds:g} s{why}",
        hint="check the URL or mirror and the network (a proxy? HTTPS_PROXY); to wait "
        f"longer for a slow server, set {DEADLINE_ENV}=SECONDS (now {seconds:g})",
    )
