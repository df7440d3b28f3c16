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
    import yaml

    if name not in TABLES:
        raise CompatDataError(f"unknown compatibility table {name!r}")
    path = table_path(name)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with path.open(encoding="utf-8") as handle:
            raw = yaml.load(handle, Loader=loader)
    except OSError as exc:
        raise CompatDataError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise CompatDataError(f"{path}: expected a mapping at the top")
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise CompatDataError(
            f"{path}: schema_version {raw.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    if not raw.get("sources"):
        raise CompatDataError(f"{path}: the `sources` note is missing")
    return raw


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
