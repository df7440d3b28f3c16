"""Loading the compatibility tables (``fdl/data/compat/*.yaml``) and comparing versions.

Each table is read once per process. A table that does not match what the code expects is
a packaging bug, reported as :class:`CompatDataError` (not a user error).
"""

from __future__ import annotations

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
    "rocm",
    "nccl",
)

_VERSION = re.compile(r"^v?([0-9]{1,18}(?:\.[0-9]{1,18})*)(?!\.?\d)")  # ASCII, bounded (issue 42)


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


# The parsed tables are kept between runs (fdl._kept: marshal data in <cache>/tables/,
# under the table's full text), so a command whose question needs a table (a floDl
# project's framework check) does not import PyYAML: an entry is used only for the same
# text, character for character, read by the same fdl. Tables are fdl's own data.
_TABLE_FORMAT = 1
_MAX_TABLE_BYTES = 4 * 1024 * 1024


def _table_key(name: str, text: str) -> tuple[object, ...]:
    from fdl import __version__

    return (_TABLE_FORMAT, __version__, name, text)


def _table_entry(name: str) -> Path:
    from fdl.paths import cache_dir

    return cache_dir() / "tables" / f"{name}.marshal"


def _kept_table(name: str, text: str) -> dict[str, Any] | None:
    """The table parsed from ``text`` before, or None."""
    from fdl._kept import kept

    found = kept(_table_entry(name), _table_key(name, text), limit=_MAX_TABLE_BYTES)
    return found if isinstance(found, dict) else None


def _keep_table(name: str, text: str, raw: dict[str, Any]) -> None:
    from fdl._kept import keep

    keep(_table_entry(name), _table_key(name, text), raw, limit=_MAX_TABLE_BYTES)


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
