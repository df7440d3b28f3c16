"""Composing shell scripts from a command's parts and the user's arguments.

User arguments are quoted for POSIX ``sh`` so that every byte reaches the
program unchanged: quotes, ``$``, backticks, ``;``, newlines, globs, empty
strings and leading dashes. Text written in the manifest (``run:``,
``append:``, ``entry:``) is shell syntax and is used as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fdl._grammar import quoted

__all__ = [
    "ALL_ARGS",
    "ScriptParts",
    "compose_entry",
    "compose_run",
    "quote",
    "quote_all",
    "split_append",
    "split_user_args",
]

# The user's arguments in a script: they travel as the shell's positional
# parameters (``sh -c 'script "$@"' sh ARGS...``), so their size is limited only
# by the system's limit for a program's arguments, not by one argument's.
ALL_ARGS = '"$@"'

_SEPARATOR = re.compile(r"(?:^|\s)--(?:\s|$)")


def quote(word: str) -> str:
    """``word`` as one POSIX shell word (bare when safe, else single-quoted; bytes that
    are not UTF-8 as ``"$(printf '\\377')"``): :func:`fdl._grammar.quoted`'s shell writer,
    so a NUL from a manifest is refused (exit 2) rather than cut the script."""
    return quoted("shell", word, what="a word of the script", source="the command")


def quote_all(words: Sequence[str]) -> list[str]:
    """Each word quoted with :func:`quote`."""
    return [quote(word) for word in words]


@dataclass(frozen=True)
class ScriptParts:
    """``append:`` split on its own ``--``.

    Attributes:
        pre: Text before the separator (goes right after the user's arguments).
        post: Text after the separator.
        has_separator: Whether ``append:`` contains a standalone ``--``.
    """

    pre: str
    post: str
    has_separator: bool


def split_append(append: str | None) -> ScriptParts:
    """Split ``append:`` on its first whitespace-bounded ``--``.

    ``"-- --nocapture"`` -> ("", "--nocapture"); ``"--release"`` -> ("--release", "").
    """
    text = (append or "").strip()
    match = _SEPARATOR.search(text)
    if match is None:
        return ScriptParts(text, "", False)
    return ScriptParts(text[: match.start()].strip(), text[match.end() :].strip(), True)


def split_user_args(args: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Split the user's arguments on their first ``--``: (before, after or None)."""
    if "--" not in args:
        return list(args), None
    index = list(args).index("--")
    return list(args[:index]), list(args[index + 1 :])


def _join(*pieces: str) -> str:
    return " ".join(piece for piece in pieces if piece)


def compose_run(
    run: str,
    append: str | None,
    pre_words: Sequence[str],
    post_words: Sequence[str] | None,
    *,
    use_append: bool = True,
) -> str:
    """The script for a ``run:`` command.

    Layout: ``run [append-pre] [args] -- [append-post] [runner-args]`` where
    the ``--`` appears when ``append:`` has one or the user gave a second ``--``.

    Args:
        run: The ``run:`` script (its arguments go at its end).
        append: The ``append:`` text, or None.
        pre_words: Already-quoted words before the user's second ``--``.
        post_words: Already-quoted words after it, or None without a second ``--``.
        use_append: False for ``--no-append``.
    """
    parts = split_append(append) if use_append else ScriptParts("", "", False)
    script = _join(run.strip(), parts.pre, " ".join(pre_words))
    if parts.has_separator or parts.post or post_words is not None:
        script = _join(script, "--", parts.post, " ".join(post_words or []))
    return script


def compose_entry(entry: str, words: Sequence[str]) -> str:
    """The script for an ``entry:``: the entry followed by already-quoted words."""
    return _join(entry.strip(), " ".join(words))
