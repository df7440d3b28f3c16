"""Turning a nested manifest's settings and a preset into flags for the entry.

Structured sections (``ddp:``, ``training:``, ``output:``) map to flags
through the table in :mod:`fdl.manifest.sections._structured`; ``options:``
become ``--key value`` in key order (``true`` a bare switch, ``false``/null
left out). A preset's values override the manifest's, key by key.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from fdl.manifest.sections import FIELDS, SECTIONS

__all__ = ["config_words", "format_value", "merge_settings", "option_words"]


def merge_settings(
    base: Mapping[str, Any], preset: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Sections and ``options`` of ``base`` with ``preset`` laid over them, key by key."""
    merged: dict[str, dict[str, Any]] = {}
    for section in (*SECTIONS, "options"):
        values = dict(base.get(section) or {})
        for key, value in ((preset or {}).get(section) or {}).items():
            if value is not None:
                values[key] = value
        merged[section] = values
    return merged


def format_value(value: Any) -> str:
    """A manifest value as one command-line word."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _field_words(flag: str, style: str, value: Any) -> list[str]:
    if style == "switch":
        return [flag] if value is True else []
    if style == "list" and isinstance(value, list):
        return [flag, ",".join(format_value(v) for v in value)]
    if style == "pair" and isinstance(value, Mapping):
        return [flag, f"{format_value(value['slow_rank'])}:{format_value(value['ratio'])}"]
    return [flag, format_value(value)]


def option_words(options: Mapping[str, Any], list_options: Collection[str] = ()) -> list[str]:
    """``options:`` as flags, in key order.

    Args:
        options: Key -> value (``batch_size`` becomes ``--batch-size``).
        list_options: Option names the schema declares as lists (comma-joined).
    """
    words: list[str] = []
    for key in sorted(options):
        value = options[key]
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, list) and flag[2:] in list_options:
            words.extend([flag, ",".join(format_value(v) for v in value)])
        else:
            words.extend([flag, format_value(value)])
    return words


def config_words(
    settings: Mapping[str, Mapping[str, Any]], list_options: Collection[str] = ()
) -> list[str]:
    """All flags for merged settings: structured sections in table order, then options."""
    words: list[str] = []
    for row in FIELDS:
        if row.flag is None:
            continue
        value = (settings.get(row.section) or {}).get(row.key)
        if value is None:
            continue
        words.extend(_field_words(row.flag, row.style, value))
    words.extend(option_words(settings.get("options") or {}, list_options))
    return words
