"""What this machine pushed, so that pushing an unchanged variant again packs nothing.

Packing a CUDA variant reads and compresses gigabytes (about a minute for 1.5 GB) only to
find that the registry holds every blob. A push records, outside the variant's tree (whose
every entry is pushed), the tree's fingerprint (each entry's path, type, size, mode and
modification time: ``stat`` only) with the pushed tag and digest. The next push of the same
tree to the same repository, tag and compression asks the registry for the tag's manifest
first: when it is still that digest, nothing is packed or uploaded.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from fdl._files import atomic_write_text, read_small_text
from fdl.paths import Context

__all__ = ["fingerprint", "recall_push", "remember_push"]

_LIMIT = 1 << 20


def fingerprint(tree: Path) -> str:
    """The tree as it is on disk (every entry's path, type, size, mode, mtime): it changes
    when any file is rewritten, added or removed; reading no file's content."""
    digest = hashlib.sha256()
    for directory, subdirs, files in os.walk(tree):
        subdirs.sort()
        base = Path(directory)
        for name in sorted([*subdirs, *files]):
            path = base / name
            st = path.lstat()
            relative = path.relative_to(tree).as_posix()
            digest.update(f"{relative}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _record_file(context: Context, variant: str) -> Path:
    return context.libtorch_dir / ".pushed" / (variant.replace("/", "-") + ".json")


def _key(repository: str, tag: str | None, compression: str, content: str) -> str:
    return json.dumps([repository, tag, compression, content])


def _records(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_small_text(path, limit=_LIMIT) or "{}")
    except (ValueError, OSError):  # unreadable or not fdl's: as if nothing was recorded
        return {}
    return data if isinstance(data, dict) else {}


def recall_push(
    context: Context, variant: str, repository: str, tag: str | None, compression: str, content: str
) -> dict[str, Any] | None:
    """The push recorded for this tree, repository, tag (None: the default) and
    compression (``PushResult.to_json()``), or None."""
    found = _records(_record_file(context, variant)).get(
        _key(repository, tag, compression, content)
    )
    return found if isinstance(found, dict) and isinstance(found.get("digest"), str) else None


def remember_push(
    context: Context,
    variant: str,
    repository: str,
    tag: str | None,
    compression: str,
    content: str,
    pushed: dict[str, Any],
) -> None:
    """Record a finished push (kept: the last few per variant)."""
    path = _record_file(context, variant)
    records = _records(path)
    records.pop(_key(repository, tag, compression, content), None)
    records[_key(repository, tag, compression, content)] = pushed
    kept = dict(list(records.items())[-8:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(kept, sort_keys=False, indent=1) + "\n")
    except OSError:  # a record is a shortcut: without it the next push packs again
        pass
