"""``fdl diagnose``: whether this machine's GPUs, toolchain and active libtorch fit together.

:func:`run_diagnose` returns grouped :class:`Check` results, each problem with a severity
and the command that fixes it; the CLI renders them as text or JSON. The check model
lives in :mod:`fdl.checks` (``fdl libtorch verify`` reports with it too) and is re-exported
here. Deciding what to install (``fdl setup``) is :func:`fdl.libtorch.plan_setup`.
"""

from __future__ import annotations

from fdl.checks import Check, Severity, count, worst
from fdl.diagnose.checks import Diagnosis, run_diagnose

__all__ = ["Check", "Diagnosis", "Severity", "count", "run_diagnose", "worst"]
