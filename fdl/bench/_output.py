"""Where ``fdl bench`` writes: only a results file of its own, only plots of its own.

``bench run -o FILE`` appends to ``FILE``: an existing file must be a results file (its
first line a run header), or ``bench run -o README.md`` would append JSON to the user's
README. ``bench report --plot DIR`` replaces ``DIR/<name>.png`` only when fdl drew it
(the PNG's ``Source`` text says so).
"""

from __future__ import annotations

import json
from pathlib import Path

from fdl._files import first_line, output_refusal
from fdl.errors import UsageError

__all__ = ["PLOT_SOURCE", "check_plot_file", "check_results_file"]

# The PNG text chunk fdl writes into its plots (matplotlib's `metadata=`).
PLOT_SOURCE = "fdl bench report"
_HEADER_LIMIT = 1 << 20


def check_results_file(path: Path) -> None:
    """Refuse ``path`` as the results file unless it is new, empty or a results file.

    Raises:
        UsageError: a FIFO, a device, a directory, or a file that is not fdl's results.
    """
    problem = output_refusal(path)
    if problem is not None:
        raise UsageError(problem, hint="give -o a new file, e.g. -o .fdl/bench.jsonl")
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        header = json.loads(first_line(path, _HEADER_LIMIT))
    except ValueError:
        header = None
    if not (isinstance(header, dict) and header.get("type") == "run" and "format" in header):
        raise UsageError(
            f"{path} is not a results file of `fdl bench run` (its first line is not a run "
            "header), and fdl appends only to its own",
            hint="give -o a new file, e.g. -o .fdl/bench.jsonl",
        )


def check_plot_file(path: Path) -> None:
    """Refuse replacing ``path`` unless it is absent or a plot fdl drew.

    Raises:
        UsageError: a file of the user's (or not a file) is there.
    """
    problem = output_refusal(path.parent, directory=True) or output_refusal(path)
    if problem is not None:
        raise UsageError(problem, hint="choose another --plot directory")
    if not path.exists():
        return
    with path.open("rb") as handle:
        head = handle.read(1 << 16)  # the text chunks come before the image data
    if not head.startswith(b"\x89PNG") or PLOT_SOURCE.encode() not in head:
        raise UsageError(
            f"{path} was not drawn by fdl, and --plot would replace it",
            hint="choose another --plot directory, or move the file aside",
        )
