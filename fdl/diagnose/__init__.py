"""Whether this machine's GPUs, toolchain and active libtorch fit together.

- :mod:`fdl.diagnose.checks`: ``fdl diagnose``: grouped :class:`Check` results, each
  problem with a severity and the command that fixes it.
- :mod:`fdl.diagnose.setup`: ``fdl setup``: detect, decide what fits (an official variant,
  a wheel, or a source build) and carry it out.

Checks are data (:class:`Check`); the CLI renders them as text or JSON.
"""

from __future__ import annotations

from fdl.diagnose._model import Check, Severity, count, worst

__all__ = ["Check", "Severity", "count", "worst"]
