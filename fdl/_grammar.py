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

The quoting writers are here too, one per file kind (:func:`quoted`: a shell word, a
Dockerfile string, a YAML or JSON string, an HCL string, an ``#SBATCH`` directive): each
checks the value against its kind's grammar first, so every generator (images, deploy,
tasks, ci, scaffold, nccl, libtorch builds) writes a value from outside by the same rule.
"""

from __future__ import annotations

import re

from fdl._text import printable
from fdl.errors import EnvironmentProblem, FdlError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "FACTS",
    "KINDS",
    "Grammar",
    "checked",
    "count",
    "fill",
    "quoted",
    "refused_char",
    "sbatch_directive",
]

# Longer than any value fdl writes from outside (a path, a URL, a version); a value this
# long is refused rather than written, whatever it holds.
LONGEST = 4096
# A quoting writer's bound: what it writes as one piece may be long (a user's argument, a
# command's script, a label); beyond this no program's arguments or file would hold it.
QUOTED_LONGEST = 1 << 24


class Grammar:
    """A file kind's grammar: the characters a value may hold there (``allowed``, a
    character class; with ``printable``, only what ``str.isprintable`` takes), the
    sequences it may not (``never``), and its longest length."""

    __slots__ = ("allowed", "allowed_run", "longest", "name", "never", "printable")

    def __init__(
        self,
        name: str,
        allowed: str,
        *,
        never: tuple[str, ...] = (),
        longest: int = LONGEST,
        printable: bool = False,
    ) -> None:
        self.name = name
        self.printable = printable
        self.allowed = re.compile(allowed)
        # one character class repeats without a group (a 10 KB script: 30 times faster)
        simple = allowed.startswith("[") and allowed.endswith("]") and "|" not in allowed
        self.allowed_run = re.compile(f"{allowed}*" if simple else f"(?:{allowed})*")
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
        if self.allowed_run.fullmatch(value) and (not self.printable or value.isprintable()):
            return None
        return next(
            describe(char)
            for char in value
            if not self.allowed.fullmatch(char) or (self.printable and not char.isprintable())
        )


def describe(char: str) -> str:
    names = {
        "\n": "a line break",
        "\r": "a carriage return",
        "\t": "a tab",
        "\0": "a NUL",
        '"': "a double quote",
        "\\": "a backslash",
        "\u2028": "a line separator (U+2028)",
        "\u2029": "a paragraph separator (U+2029)",
    }
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
    "dockerfile": Grammar("Dockerfile", _PRINTABLE, longest=QUOTED_LONGEST),
    # An #SBATCH line: sbatch has no escape for '"' inside quotes, nor for a backslash.
    # (and what Python does not call printable: no-break and other Unicode blanks)
    "sbatch": Grammar("#SBATCH line", r'(?!["\\])' + _PRINTABLE, printable=True),
    # Quoting writers (:func:`quoted`): the shell's single quotes (no NUL, which would
    # cut the script), JSON's, YAML's and HCL's double quotes with their escapes (a line
    # break is ``\\n`` there; no lone surrogate, which no UTF-8 file holds).
    "shell": Grammar("shell script", r"[^\x00]", longest=QUOTED_LONGEST),
    # A shell word of a Dockerfile's RUN instruction: the instruction ends at a line break,
    # even inside the shell's quotes.
    "run": Grammar("Dockerfile RUN line", _PRINTABLE, longest=QUOTED_LONGEST),
    "json": Grammar("JSON file", r"[^\ud800-\udfff]", longest=QUOTED_LONGEST),
    # docker buildx bake's HCL file: JSON's escapes, and `${`/`%{` kept literal.
    "hcl": Grammar("HCL file", r"[^\ud800-\udfff]", longest=QUOTED_LONGEST),
    "yaml": Grammar("YAML file", r"[^\ud800-\udfff]", longest=QUOTED_LONGEST),
}

# What the facts fdl reads from a wheel or an index may look like (PEP 440's public
# versions with a local label, as torch's are; NVIDIA's CUDA versions; a git commit).
FACTS: dict[str, Grammar] = {
    "torch-version": Grammar("torch version", r"[0-9A-Za-z.+!_-]", never=("..", "++"), longest=64),
    "cuda": Grammar("CUDA version", r"[0-9.]", never=("..",), longest=8),
    "commit": Grammar("git commit", r"[0-9a-f]", longest=64),
    # what a Dockerfile's FROM takes as one word (name, tag, digest)
    "image": Grammar("image reference", r"[A-Za-z0-9._:/@-]", longest=512),
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


# --- the quoting writers: a value checked against its kind's grammar, then quoted -------

_SHELL_SAFE = re.compile(r"[A-Za-z0-9_./:=+@,%-]+")
_SURROGATES = re.compile("[\udc80-\udcff]+")


def _shell(word: str) -> str:
    """One POSIX shell word: bare when safe, else single-quoted (``'`` as ``'\\''``);
    bytes that are not UTF-8 (surrogate escapes, as Python decodes ``argv``) as
    ``"$(printf '\\377')"``, so the text is exact and pastes into ``sh``."""
    if word and _SHELL_SAFE.fullmatch(word):
        return word
    try:  # the common case, told fast (a regex search for surrogates is 25 times slower)
        word.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return _single(word)
    pieces: list[str] = []
    last = 0
    for match in _SURROGATES.finditer(word):
        pieces.append(_single(word[last : match.start()]))
        octal = "".join(f"\\{ord(c) - 0xDC00:03o}" for c in match.group())
        pieces.append(f"\"$(printf '{octal}')\"")
        last = match.end()
    if not pieces:
        return _single(word)
    if last < len(word):
        pieces.append(_single(word[last:]))
    return "".join(piece for piece in pieces if piece != "''") or "''"


def _single(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _dockerfile(value: str) -> str:
    # double-quoted (ENV, LABEL, ARG): no variable expansion; the grammar keeps it one line
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def _json(value: str) -> str:
    import json

    return json.dumps(value)  # ASCII escapes


# What a YAML reader takes raw in a double-quoted scalar (YAML 1.1's printable set, less
# the separators that other tools, and fdl's own line splitting, take for a line break)
_YAML_ESCAPED = re.compile(
    "[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def _yaml(value: str) -> str:
    # JSON's escapes, which YAML reads too; a character beyond U+FFFF written as itself
    # (YAML readers do not join JSON's surrogate pairs)
    import json

    text = json.dumps(value, ensure_ascii=False)
    return _YAML_ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _hcl(value: str) -> str:
    return _json(value).replace("${", "$${").replace("%{", "%%{")


_QUOTERS: dict[str, Callable[[str], str]] = {
    "shell": _shell,
    "run": _shell,
    "dockerfile": _dockerfile,
    "yaml": _yaml,
    "json": _json,
    "hcl": _hcl,
}


def quoted(
    kind: str,
    value: str,
    *,
    what: str = "a value",
    source: str = "fdl",
    hint: str = "change the value where it is set",
    error: type[FdlError] = UsageError,
) -> str:
    """``value`` written as one piece of a file of ``kind`` (``shell``: a POSIX word;
    ``run``: one in a Dockerfile's RUN line; ``dockerfile``: a double-quoted string; ``yaml``/``json``: a JSON string, which YAML
    reads too; ``hcl``: bake's string), after :func:`checked` against ``kind``'s grammar.
    The one writer of a value from outside into these files.

    Raises:
        FdlError: ``error`` (UsageError, exit 2, for a manifest's or the user's value;
            EnvironmentProblem or NetworkError for what this machine or an index holds)
            naming ``what`` and ``source``.
    """
    if value:  # an empty value is one piece too ('', "")
        checked(kind, value, what=what, source=source, hint=hint, error=error)
    return _QUOTERS[kind](value)


def sbatch_directive(option: str, value: object) -> str:
    """``--option=value`` as an ``#SBATCH`` line holds it, or a refusal.

    sbatch splits a directive at whitespace, reads ``'`` and ``"`` as quotes and an
    unquoted ``#`` as the start of a comment; it has no escape for a ``"`` inside quotes,
    and a line ends the directive. So a value the ``sbatch`` grammar refuses (not
    printable, a ``"`` or a backslash) is refused; one with a space, a ``'`` or a ``#`` is
    double-quoted.

    Raises:
        UsageError: a value that no ``#SBATCH`` line can hold, naming the option.
    """
    text = str(value)
    checked(
        "sbatch",
        text,
        what="the value",
        source=f"#SBATCH --{option}=...",
        hint=f"rename the directory or value without it; for --{option} set on the "
        "target, change it in fdl.yml's deploy section",
        error=UsageError,
    )
    if any(c.isspace() or c in "'#" for c in text):
        return f'--{option}="{text}"'
    return f"--{option}={text}"
