"""Golden files: exact expected text of generated output.

Set FDL_UPDATE_GOLDEN=1 to rewrite the expected files from the current output
(then review the diff with git).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"


def assert_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with ``tests/golden/<name>`` (or rewrite it)."""
    path = GOLDEN_DIR / name
    if os.environ.get("FDL_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        raise AssertionError(
            f"golden file {path} is missing; run with FDL_UPDATE_GOLDEN=1 to create it"
        )
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"golden/{name}",
                tofile="actual",
            )
        )
        raise AssertionError(f"output differs from golden/{name}:\n{diff}")
