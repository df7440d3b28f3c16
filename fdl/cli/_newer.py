"""Tables older than ``$FDL_COMPAT_MAX_AGE_DAYS`` (30) days and PyPI has a newer torch: say so.

Only when a command picks the newest release itself (no ``--torch``, no manifest pin), and
only as a note: the plan stays on the reviewed tables, and the note names the ``--torch``
that uses the newer release (read from its artefacts at run time, :mod:`fdl.cli._learn`).
PyPI is asked at most once a day (the answer, or that it did not answer, is kept in
``<cache>/compat/pypi-torch.json``), with short timeouts: offline costs at most those,
once a day, and is no error.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from fdl.errors import FdlError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from fdl.cli._console import Console

__all__ = ["MAX_AGE_ENV", "newer_release_note", "stale_days"]

MAX_AGE_ENV = "FDL_COMPAT_MAX_AGE_DAYS"
MAX_AGE_DAYS = 30
TIMEOUT_S = 3.0  # to connect, and between two reads

# (url) -> the body; raises FdlError when PyPI cannot be read
Fetch = Callable[[str], bytes]


def _today() -> datetime.date:
    return datetime.date.today()


def stale_days(environ: Mapping[str, str], reviewed: str, today: datetime.date) -> int | None:
    """How many days old the tables are when that is more than the allowed age, else None
    (``$FDL_COMPAT_MAX_AGE_DAYS``; 0 turns the check off).

    Raises:
        UsageError: the variable is not a whole number of days.
    """
    raw = environ.get(MAX_AGE_ENV, "").strip() or str(MAX_AGE_DAYS)
    if not raw.isdigit():
        raise UsageError(
            f"${MAX_AGE_ENV}={raw!r} is not a whole number of days",
            hint=f"set it to e.g. {MAX_AGE_DAYS} (0 turns the check for newer releases off)",
        )
    limit = int(raw)
    age = (today - datetime.date.fromisoformat(reviewed)).days
    return age if limit and age > limit else None


def _fetch(url: str) -> bytes:
    from fdl.net import read_range

    return read_range(url, 0, None, timeout=TIMEOUT_S)[0]


def newest_on_pypi(
    pypi: str, cache: Path, today: datetime.date, fetch: Fetch = _fetch
) -> str | None:
    """The newest final torch release on PyPI (None when PyPI did not answer), asked at
    most once a day: the answer is kept in ``cache``."""
    from fdl._files import atomic_write_text, read_small_text
    from fdl.net import read_json
    from fdl.refresh import newest_release

    try:
        kept = read_json((read_small_text(cache) or "{}").encode())
    except (ValueError, OSError):  # not text fdl wrote, a FIFO, a device: a miss
        kept = None
    if isinstance(kept, dict) and kept.get("checked_on") == today.isoformat():
        newest = kept.get("newest")
        if newest is None or _release(newest) is not None:  # else damaged: asked again
            return _release(newest)
    try:
        project = read_json(fetch(f"{pypi}/torch/json"))  # None: malformed, or too deep
        newest = newest_release(project, pypi) if isinstance(project, dict) else None
        newest = _release(newest)
    except (FdlError, ValueError):
        newest = None
    try:
        record = {"checked_on": today.isoformat(), "newest": newest, "from": pypi}
        atomic_write_text(cache, json.dumps(record) + "\n")
    except OSError:
        pass  # a read-only cache: asked again next time, no error
    return newest


def _release(value: object) -> str | None:
    """``value`` when it is a release fdl can compare (a bounded version, from a cache or
    PyPI), else None."""
    from fdl._grammar import FACTS
    from fdl.compat import version_key

    if not isinstance(value, str) or FACTS["torch-version"].first_refused(value) is not None:
        return None
    try:
        version_key(value)
    except ValueError:
        return None
    return value


def newer_release_note(
    console: Console,
    environ: Mapping[str, str],
    *,
    pypi: str,
    today: Callable[[], datetime.date] | None = None,
    fetch: Fetch = _fetch,
) -> None:
    """Say on stderr that PyPI has a torch newer than the tables, when they are stale."""
    from fdl.compat import releases, tables_reviewed, version_key
    from fdl.paths import cache_dir

    reviewed = tables_reviewed()
    now = (today or _today)()  # looked up at each call: the tests' fixed clock
    age = stale_days(environ, reviewed, now)
    if age is None:
        return
    latest = releases()[-1].latest
    newest = newest_on_pypi(pypi, cache_dir(environ) / "compat" / "pypi-torch.json", now, fetch)
    if newest is None or version_key(newest) <= version_key(latest):
        return
    console.note(
        f"fdl's torch tables were reviewed on {reviewed} ({age} days ago) and PyPI has torch "
        f"{newest}, newer than {latest}, which this plan uses. To plan with {newest} (its "
        f"facts read from its artefacts at run time, not reviewed): --torch {newest}, or "
        f'libtorch.torch: "{newest}" in fdl.yml; to stop this note: ${MAX_AGE_ENV}=0',
        once_key="newer-torch",
    )
