"""Which container runtimes pull zstd-compressed image layers.

Read from ``fdl/data/compat/layers.yaml``; ``fdl.deploy`` decides a target's ``auto``
layer compression from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from fdl.compat._data import CompatDataError, load_table

__all__ = ["ZstdPuller", "zstd_puller", "zstd_pullers"]


@dataclass(frozen=True)
class ZstdPuller:
    """Whether a runtime pulls images with zstd layers, from which version, and the source.

    Attributes:
        runtime: A SLURM runtime (``docker``, ``pyxis``...) or ``kubernetes``.
        pulls_zstd: Whether ``auto`` gives it zstd layers.
        since: The first version that pulls them, if known.
        note: Why, in one sentence (shown by ``fdl deploy``).
        source: Where the fact comes from.
        verified: False when no primary source confirmed it.
    """

    runtime: str
    pulls_zstd: bool
    since: str | None
    note: str
    source: str
    verified: bool = True


@cache
def zstd_pullers() -> dict[str, ZstdPuller]:
    """Every runtime of the table, by name."""
    rows: dict[str, ZstdPuller] = {}
    for runtime, entry in load_table("layers")["runtimes"].items():
        if "auto_zstd" not in entry or "source" not in entry:
            raise CompatDataError(f"layers.yaml: runtime {runtime!r} lacks auto_zstd or source")
        rows[str(runtime)] = ZstdPuller(
            str(runtime),
            bool(entry["auto_zstd"]),
            str(entry["since"]) if entry.get("since") else None,
            " ".join(str(entry["note"]).split()),
            str(entry["source"]),
            bool(entry.get("verified", True)),
        )
    return rows


def zstd_puller(runtime: str) -> ZstdPuller:
    """The row of ``runtime``.

    Raises:
        CompatDataError: the table does not know it (a runtime added without its row).
    """
    rows = zstd_pullers()
    if runtime not in rows:
        raise CompatDataError(f"layers.yaml has no row for the runtime {runtime!r}")
    return rows[runtime]
