"""Read one torch release newer than the tables from its artefacts on PyPI into fdl's cache,
where :func:`fdl.compat.release` answers for it: the code behind ``python -m fdl.refresh
learn`` and behind a command that names such a release (``fdl libtorch download --torch
2.16.0``), which reads it at run time and plans again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.refresh._release import (
    PYPI,
    ReadRange,
    learned_entry,
    minor_of,
    project_json,
    published,
    read_release,
)

__all__ = ["Learned", "learn_release", "newest_release"]

# (what is being read, bytes read so far in all)
OnRead = Callable[[str, int], None]


@dataclass(frozen=True)
class Learned:
    """A release read and kept: its cache entry, where it is, what reading it cost."""

    version: str
    entry: dict[str, Any]
    path: Path
    bytes_read: int
    seconds: float


def learn_release(
    version: str,
    read: ReadRange,
    *,
    today: str,
    pypi: str = PYPI,
    device_code: bool = True,
    read_by: str = "python -m fdl.refresh learn",
    on_read: OnRead | None = None,
) -> Learned:
    """Read torch ``version`` (``2.16`` or ``2.16.0``, newer than the tables) from PyPI:
    its project JSON, its wheels' METADATA by HTTP range and, with ``device_code``, the
    archs of its ``libtorch_cuda.so`` streamed (about 360 MB); keep them in fdl's cache.

    Raises:
        UsageError: not a release newer than the tables, PyPI has no final ``version``,
            or no CPython manylinux x86_64 wheel of it.
        NetworkError: PyPI cannot be read (nothing is written then).
    """
    from fdl._files import atomic_write_text
    from fdl.compat import learned_path, releases, version_key
    from fdl.errors import UsageError

    try:
        key = version_key(version)
    except ValueError:
        key = ()
    newest = releases()[-1]
    if len(key) < 2 or key[:2] <= version_key(newest.version)[:2]:
        raise UsageError(
            f"{version!r} is not a torch release newer than fdl's tables (they end at "
            f"{newest.latest})",
            hint=f"name a release newer than {newest.latest} that PyPI has (fdl plans with "
            "the tables' releases as they are)",
        )
    pypi = pypi.rstrip("/")
    done = 0
    what = "torch's project JSON"

    def counted(url: str, start: int, length: int | None) -> tuple[bytes, int]:
        nonlocal done
        data, total = read(url, start, length)
        done += len(data)
        if on_read is not None:
            on_read(what, done)
        return data, total

    started = time.monotonic()
    if on_read is not None:
        on_read(what, 0)
    project = project_json(
        counted, "torch", pypi=pypi, hint="check the PyPI address ($FDL_PYPI_URL)"
    )
    items = [
        p
        for p in published(project, "torch", f"{pypi}/torch/json")
        if minor_of(p.version) == minor_of(version)
        and (len(key) < 3 or version_key(p.version) <= key[:3])
    ]
    if not items or (len(key) >= 3 and version_key(items[-1].version) != key[:3]):
        raise UsageError(
            f"PyPI has no final torch {version} ({pypi}/torch/json)",
            hint=f"use --torch {newest.latest}, or a release PyPI has",
        )
    what = f"torch {items[-1].version}'s wheels (METADATA"
    what += ", then libtorch_cuda.so's archs, about 360 MB)" if device_code else " only)"
    facts = read_release(project, items, counted, pypi=pypi, device_code=device_code)
    if facts is None:
        raise UsageError(
            f"torch {version} has no CPython manylinux x86_64 wheel on PyPI",
            hint=f"use --torch {newest.latest}",
        )
    entry = learned_entry(facts, newest, today)
    entry["read_by"] = read_by
    path = learned_path(version)
    atomic_write_text(path, json.dumps(entry, indent=2) + "\n")
    return Learned(version, entry, path, done, round(time.monotonic() - started, 1))


def newest_release(project: dict[str, Any], pypi: str = PYPI) -> str | None:
    """The newest final torch release (a file not yanked) in PyPI's JSON for torch."""
    found = published(project, "torch", f"{pypi.rstrip('/')}/torch/json")
    return found[-1].version if found else None
