"""Loading the compatibility tables (``fdl/data/compat/*.yaml``) and comparing versions.

Each table is read once per process. A table that does not match what the code expects is
a packaging bug, reported as :class:`CompatDataError` (not a user error).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from fdl._assets import data_dir

SCHEMA_VERSION = 1
TABLES = (
    "archs",
    "cuda",
    "pytorch",
    "libtorch",
    "runtime",
    "build",
    "build_estimate",
    "gpus",
    "layers",
    "frameworks",
)

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)")


class CompatDataError(RuntimeError):
    """A compatibility table is missing or malformed (a bug in fdl's data)."""


def table_path(name: str) -> Path:
    """Where the table ``name`` lives."""
    return data_dir() / "compat" / f"{name}.yaml"


@cache
def load_table(name: str) -> Mapping[str, Any]:
    """The parsed table ``name`` (``cuda``, ``pytorch``, ...), checked for its schema."""
    if name not in TABLES:
        raise CompatDataError(f"unknown compatibility table {name!r}")
    path = table_path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CompatDataError(f"cannot read {path}: {exc}") from exc
    raw = _kept_table(name, text)
    if raw is None:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        raw = yaml.load(text, Loader=loader)
        if isinstance(raw, dict):
            _keep_table(name, text, raw)
    if not isinstance(raw, dict):
        raise CompatDataError(f"{path}: expected a mapping at the top")
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise CompatDataError(
            f"{path}: schema_version {raw.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    if not raw.get("sources"):
        raise CompatDataError(f"{path}: the `sources` note is missing")
    return raw


# The parsed tables are kept between runs (marshal data in <cache>/tables/, beside the
# table's full text), so a command whose question needs a table (a project command's
# framework check, a floDl project's release) does not import PyYAML: an entry is used only
# for the same text, character for character, read by the same fdl. Tables are fdl's own
# data (no secrets); any failure to read or write an entry only means parsing again.
_TABLES_CACHE = "tables"
_TABLE_FORMAT = 1
_MAX_TABLE_BYTES = 4 * 1024 * 1024


def _table_entry(name: str) -> Path:
    from fdl.paths import cache_dir

    return cache_dir() / _TABLES_CACHE / f"{name}.marshal"


def _kept_table(name: str, text: str) -> dict[str, Any] | None:
    """The table parsed from ``text`` before, or None."""
    import marshal
    import os

    from fdl import __version__

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        handle = os.open(_table_entry(name), flags)
    except OSError:
        return None
    try:
        with open(handle, "rb") as stream:
            data = stream.read(_MAX_TABLE_BYTES + 1)
        kept = marshal.loads(data) if len(data) <= _MAX_TABLE_BYTES else None
    except (OSError, EOFError, ValueError, TypeError):
        return None
    key = (_TABLE_FORMAT, __version__, name, text)
    if not isinstance(kept, tuple) or len(kept) != 5 or kept[:4] != key:
        return None
    return kept[4] if isinstance(kept[4], dict) else None


def _keep_table(name: str, text: str, raw: dict[str, Any]) -> None:
    """Keep the parsed table (atomically, 0600); a table marshal cannot hold is not kept."""
    import marshal
    import os

    from fdl import __version__
    from fdl.paths import own_cache_dir

    try:
        data = marshal.dumps((_TABLE_FORMAT, __version__, name, text, raw))
    except ValueError:  # a value YAML made that marshal cannot hold (a date)
        return
    entry = _table_entry(name)
    temporary = entry.with_name(f".{entry.name}.{os.getpid()}")
    try:
        own_cache_dir(entry.parent.parent)
        entry.parent.mkdir(mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with open(os.open(temporary, flags, 0o600), "wb") as stream:
            stream.write(data)
        os.replace(temporary, entry)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def version_key(text: str) -> tuple[int, ...]:
    """Numeric key of a version: ``"12.8.1"`` -> ``(12, 8, 1)``.

    A leading ``v`` and any local or pre-release suffix (``+cu130``, ``rc1``) are ignored.

    Raises:
        ValueError: the text does not start with a number.
    """
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(part) for part in match.group(1).split("."))


def is_version(text: str) -> bool:
    """True when ``text`` starts like a version number."""
    return _VERSION.match(text.strip()) is not None


def prefix_matches(version: str, prefix: str) -> bool:
    """True when ``version`` starts with the components of ``prefix`` (2.14.1 ~ 2.14)."""
    key, want = version_key(version), version_key(prefix)
    return key[: len(want)] == want


def in_range(version: str, since: str | None, until: str | None) -> bool:
    """True when ``since <= version <= until``; a bound compares only its own components.

    So ``until: "2.7"`` includes 2.7.1, and ``since: "2.8"`` includes 2.8.0.
    """
    key = version_key(version)
    if since is not None:
        low = version_key(since)
        if key[: len(low)] < low:
            return False
    if until is not None:
        high = version_key(until)
        if key[: len(high)] > high:
            return False
    return True


def verified(section: Mapping[str, Any] | None) -> bool:
    """A section is verified unless it says ``verified: false``."""
    return not isinstance(section, Mapping) or section.get("verified", True) is not False


def require(mapping: Mapping[str, Any], key: str, where: str) -> Any:
    """``mapping[key]``, or a :class:`CompatDataError` naming the table entry."""
    if key not in mapping or mapping[key] is None:
        raise CompatDataError(f"{where}: `{key}` is missing")
    return mapping[key]
