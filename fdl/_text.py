"""Small text helpers shared by the CLI and the core."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "did_you_mean",
    "hide_credentials",
    "plural",
    "printable",
    "public_url",
    "terminal_text",
]


def did_you_mean(word: str, options: Sequence[str]) -> str | None:
    """The closest option to ``word``, if one is close enough."""
    import difflib

    matches = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return matches[0] if matches else None


def plural(count: int, word: str) -> str:
    """``3 files``, ``1 file``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


# Characters that a terminal acts on rather than shows: C0 and C1 controls (ESC starts
# cursor moves, screen clears, OSC title and hyperlink sequences), DEL, and the bidi
# controls that reorder what is shown (Trojan Source), and the line and paragraph separators
# (a line break to some terminals and readers).
_SHOWN_AS_ESCAPES = frozenset(
    [
        *range(0x00, 0x20),
        *range(0x7F, 0xA0),
        *range(0x2028, 0x202F),
        *range(0x2066, 0x206A),
    ]
)


def printable(text: str, limit: int = 300) -> str:
    """Remote text (a registry's annotation, error body, header) made safe to print: every
    control character as an escape (``\\x1b``), and at most ``limit`` characters. The one
    rule for text that fdl did not write before it reaches a terminal or a message."""
    shown = "".join(
        char.encode("unicode_escape").decode("ascii") if ord(char) in _SHOWN_AS_ESCAPES else char
        for char in text[: limit + 1]
    )
    return shown if len(text) <= limit else shown[:limit] + "..."


_USERINFO = r"(^|[\s'\"(=]|//)[^\s'\"/@]*@(?=[^\s'\"/@])"
_TOKEN_WORD = r"(?<![\w+/=.-])(?=[\w+/=.-]*\d)(?=[\w+/=.-]*[A-Za-z])[\w+/=.-]{20,}"


def hide_credentials(text: str, *, words: bool = True) -> str:
    """``text`` without credentials: a URL's or reference's ``user:secret@`` becomes
    ``***@`` and, with ``words``, every token-like word (20 or more letters, digits and
    ``_-+/=.``, with a digit and a letter in it, such as ``ghp_...`` or a base64 secret)
    becomes ``***``. For text that may hold a secret fdl cannot name: a credential
    helper's output, an address the user typed."""
    text = re.sub(_USERINFO, r"\1***@", text)
    return re.sub(_TOKEN_WORD, "***", text) if words else text


# `sshfs://[user@]host` (a bracket right after `//`: an IPv6 host or, in a description, a
# placeholder) holds no credentials
_URL_USERINFO = r"(?i)\b([a-z][a-z0-9+.-]*://)(?!\[)[^\s/?#@'\"<>]*@"


def public_url(text: str) -> str:
    """``text`` with the user info of every URL in it hidden (``http://user:token@host/``
    becomes ``http://***@host/``): the one rule for what fdl prints, records (variant.json)
    or pushes, so an index URL's credentials (``PIP_INDEX_URL``) stay where they were given."""
    if "@" not in text or "://" not in text:
        return text
    return re.sub(_URL_USERINFO, r"\1***@", text)


# What a message line may carry to a terminal besides printable text: line breaks, tabs, and
# the colour codes (SGR: ESC [ digits m) fdl's console styles messages with.
_NOT_FOR_A_TERMINAL = (
    "\x1b(?!\\[[0-9;]*m)|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]"
)


def terminal_text(text: str) -> str:
    """A message for the terminal as fdl writes it (the console's rule, whatever the
    message quotes from outside): every control character but a line break, a tab and a
    colour code shown as an escape (``\\x1b]0;title``, ``\\r``, bidi controls), so no
    text from an index, a cache or a manifest moves the cursor, clears the screen, sets
    the title or a hyperlink, or hides what follows it. Text fdl did not write should
    still go through :func:`printable` where it is put into a message: that also keeps it
    on one line and short."""
    if text.isprintable():
        return text
    return re.sub(
        _NOT_FOR_A_TERMINAL, lambda m: m.group().encode("unicode_escape").decode("ascii"), text
    )
