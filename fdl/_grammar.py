"""What a value from outside fdl may hold when fdl writes it into a file it generates.

One rule (issue 42, point 1): a value fdl did not write itself (a wheel's file name or
``version.py``, an index's page, a manifest, a project path) enters a generated file only
through :func:`checked` (or :func:`fill`), which holds it against the grammar of that file
kind and refuses it otherwise. A grammar is what the value may be made of there without
changing what the file means: a CMake value never closes its quotes, ends its comment
line or expands ``${...}``; a linker script's never closes its comment or opens an
``INPUT(``; a one-line file's stays one line. Quoting writers (the shell's
:func:`fdl.tasks._compose.quote`, JSON, YAML's safe dumper) need only the characters no
such file carries (NUL, lone surrogates).

The facts fdl reads before it writes them (a torch version, a CUDA version, a commit) have
their own grammars here too (:data:`FACTS`), so a crafted value is refused where it is read,
naming its source; and :func:`count` is the one bounded parser of numbers read from
outside (ASCII digits only, so ``²`` is no digit; at most 18 of them).
"""

from __future__ import annotations

import re

from fdl._text import printable
from fdl.errors import EnvironmentProblem, FdlError

__all__ = ["FACTS", "KINDS", "Grammar", "checked", "count", "fill", "refused_char"]

# Longer than any value fdl writes from outside (a path, a URL, a version); a value this
# long is refused rather than written, whatever it holds.
LONGEST = 4096


class Grammar:
    """A file kind's grammar: the characters a value may hold there (``allowed``, a
    character class), the sequences it may not (``never``), and its longest length."""

    __slots__ = ("allowed", "longest", "name", "never")

    def __init__(
        self, name: str, allowed: str, *, never: tuple[str, ...] = (), longest: int = LONGEST
    ) -> None:
        self.name = name
        self.allowed = re.compile(allowed)
        self.never = never
        self.longest = longest

    def first_refused(self, value: str) -> str | None:
        """What in ``value`` the grammar refuses (described), or None."""
        if not value:
            return "nothing (an empty value)"
        if len(value) > self.longest:
            return f"{len(value)} characters (at most {self.longest})"
        for sequence in self.never:
            if sequence in value:
                return f"the sequence {sequence!r}"
        for char in value:
            if not self.allowed.fullmatch(char):
                return describe(char)
        return None


def describe(char: str) -> str:
    names = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab", "\0": "a NUL"}
    if char in names:
        return names[char]
    shown = printable(char)
    return f"the character {shown!r}" if shown == char else f"the control character {shown}"


# Printable characters of any script: no C0/C1 control, DEL, line or paragraph separator,
# bidi control, or lone surrogate.
_PRINTABLE = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"

KINDS: dict[str, Grammar] = {
    # A quoted argument or a comment line of a CMake file: no quote, backslash, variable
    # reference ($), list separator (;), comment (#), parenthesis or line break.
    "cmake": Grammar("CMake file", r"[\w .+~:/=,%@-]"),
    # Inside a GNU ld script's comment or INPUT(): no '*' (so no comment end), no
    # parenthesis, quote, space or line break.
    "linker": Grammar("linker script", r"[\w.+~:/=,%@-]", never=("/*", "*/")),
    # A file tools read as one line (build-version, build-hash).
    "line": Grammar("one-line file", _PRINTABLE, longest=256),
    # A Dockerfile instruction's double-quoted value (quoted by fdl.images._render.quote).
    "dockerfile": Grammar("Dockerfile", _PRINTABLE),
    # An #SBATCH line: sbatch has no escape for '"' inside quotes, nor for a backslash.
    "sbatch": Grammar("#SBATCH line", r'(?!["\\])' + _PRINTABLE),
    # Quoting writers: the shell's single quotes, JSON, YAML's safe dumper.
    "shell": Grammar("shell script", r"[^\x00]"),
    "json": Grammar("JSON file", r"[^\ud800-\udfff]"),
    "yaml": Grammar("YAML file", _PRINTABLE + r"|\t"),
}

# What the facts fdl reads from a wheel or an index may look like (PEP 440's public
# versions with a local label, as torch's are; NVIDIA's CUDA versions; a git commit).
FACTS: dict[str, Grammar] = {
    "torch-version": Grammar("torch version", r"[0-9A-Za-z.+!_-]", never=("..", "++"), longest=64),
    "cuda": Grammar("CUDA version", r"[0-9.]", never=("..",), longest=8),
    "commit": Grammar("git commit", r"[0-9a-f]", longest=64),
}


def refused_char(kind: str, value: str) -> str | None:
    """What in ``value`` a file of ``kind`` cannot hold (described), or None."""
    return KINDS[kind].first_refused(value)


def checked(
    kind: str,
    value: str,
    *,
    what: str,
    source: str,
    hint: str,
    error: type[FdlError] = EnvironmentProblem,
) -> str:
    """``value`` when it fits the grammar of ``kind`` (a file kind of :data:`KINDS` or a
    fact of :data:`FACTS`); else ``error`` naming ``what`` it is and ``source``.

    Raises:
        FdlError: ``error`` (EnvironmentProblem, exit 4, for a local file; NetworkError,
            exit 5, for what an index served).
    """
    grammar = KINDS.get(kind) or FACTS[kind]
    bad = grammar.first_refused(value)
    if bad is None:
        return value
    why = f"no {grammar.name} holds" if kind in FACTS else f"fdl writes into no {grammar.name}"
    raise error(
        f"{source}: {what} '{printable(value, 80)}' holds {bad}, which {why}: nothing was written",
        hint=hint,
    )


def fill(kind: str, template: str, *, source: str, hint: str, **values: str) -> str:
    """``template.format(**values)`` with every value :func:`checked` against ``kind``."""
    for name, value in values.items():
        checked(kind, value, what=name.replace("_", " "), source=source, hint=hint)
    return template.format(**values)


_DIGITS = re.compile(r"[0-9]{1,18}")


def count(text: str | bytes | None) -> int | None:
    """``text`` as a number when it is 1 to 18 ASCII digits (surrounding blanks
    allowed), else None: the one parser for numbers read from outside (a header, a
    RECORD size, a version's parts, a cache). ``²``, ``٣``, ``-1`` and a 5000-digit
    number are None, never an exception."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    text = text.strip()
    return int(text) if _DIGITS.fullmatch(text) else None
