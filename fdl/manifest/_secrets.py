"""Which manifest values are secrets (masked unless --show-secrets)."""

from __future__ import annotations

import re

from fdl.manifest._nodes import TAG_SECRET, MapNode, Node, SeqNode

MASK = "***"
SECRET_KEY_PATTERNS = ("*token*", "*password*", "*passwd*", "*secret*", "*_key", "*-key")
# Keys that say where a secret is kept, not the secret: `token_env: SCCACHE_TOKEN`,
# `password_file: /run/secrets/db` (the `_FILE` convention of Docker secrets).
WHERE_KEPT_SUFFIXES = ("_env", "-env", "_file", "-file", "_path", "-path")


def is_secret_key(key: str) -> bool:
    """True when the key's name says it holds a secret (case-insensitive); a key naming
    the variable or file that holds one (``token_env``, ``password_file``) does not."""
    lowered = key.lower()
    if lowered.endswith(WHERE_KEPT_SUFFIXES):
        return False
    for piece in _SECRET_KEY_PIECES:  # most keys hold none: no pattern is tried
        if piece in lowered:
            return any(_glob(lowered, pattern) for pattern in SECRET_KEY_PATTERNS)
    return False


# The longest literal piece of each pattern: a key matching the pattern holds it.
_SECRET_KEY_PIECES = tuple(max(p.split("*"), key=len) for p in SECRET_KEY_PATTERNS)


def _glob(text: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase(text, pattern)`` for patterns whose only wildcard is ``*``
    (as :data:`SECRET_KEY_PATTERNS`): string tests, where fnmatch compiles a regex per
    pattern (six of them in every command's start)."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return text == pattern
    first, last = pieces[0], pieces[-1]
    if len(text) < len(first) + len(last):
        return False
    if not (text.startswith(first) and text.endswith(last)):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in pieces[1:-1]:
        found = text.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


# Well-known shapes of credentials, by issuer: a value of this shape is a secret whatever
# the variable is called (GITHUB_PAT=ghp_... under any name). Sources: each issuer's
# documented token format (GitHub's token prefixes, GitLab's glpat-, AWS key ids, Hugging
# Face's hf_, PyPI's macaroon prefix, Slack's xox?-, npm's npm_, Google API keys,
# Stripe/OpenAI secret keys, PEM private keys).
# No word boundary before a prefix: a token glued to a word (`xghp_...`, `=ghp_...` pasted
# without its space) is still one.
# Each shape comes with the literal texts one of which every match holds: a value holding
# none of them is not searched (nor the shape's regex compiled), which keeps the check off
# the start-up of commands that show values (tests/unit/test_manifest_secrets.py holds
# the texts to the patterns).
TOKEN_SHAPES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "a GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    (
        "a GitLab token",
        ("glpat-", "gldt-", "glptt-", "glrt-", "gloas-"),
        r"gl(?:pat|dt|ptt|rt|oas)-[A-Za-z0-9_-]{20,}",
    ),
    ("an AWS access key id", ("AKIA", "ASIA"), r"(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("a Hugging Face token", ("hf_",), r"hf_[A-Za-z0-9]{30,}"),
    ("a PyPI token", ("pypi-AgE",), r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    (
        "a Slack token",
        ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"),
        r"xox[abposr]-[0-9A-Za-z-]{10,}",
    ),
    ("an npm token", ("npm_",), r"npm_[A-Za-z0-9]{36}\b"),
    ("a Google API key", ("AIza",), r"AIza[0-9A-Za-z_-]{35}"),
    ("a Stripe secret key", ("rk_live_", "sk_live_"), r"[rs]k_live_[0-9A-Za-z]{20,}"),
    ("an OpenAI key", ("sk-",), r"sk-(?:proj-)?[A-Za-z0-9_-]{32,}"),
    ("a private key", ("-----BEGIN ",), r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    # https://user:password@host: only the user and password are the secret.
    ("a password in a URL", ("://",), r"(?<=://)[^/\s:@]{1,256}:[^/\s@]{1,256}(?=@)"),
)
_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(kind: str, pattern: str) -> re.Pattern[str]:
    found = _compiled.get(kind)
    if found is None:
        found = _compiled[kind] = re.compile(pattern)
    return found


# Every literal text above holds one of these characters (tests/unit/test_manifest_secrets.py
# checks it): a value with none of them, most values, is answered by four string tests.
_NEEDLE_CHARACTERS = ("_", "-", ":", "A")


def token_kind(value: str) -> str | None:
    """What kind of credential ``value`` looks like (``a GitHub token``), or None."""
    for character in _NEEDLE_CHARACTERS:
        if character in value:
            break
    else:
        return None
    for kind, needles, pattern in TOKEN_SHAPES:  # plain loops: called for every value shown
        for needle in needles:
            if needle in value:
                if _pattern(kind, pattern).search(value):
                    return kind
                break
    return None


def shown_text(text: str) -> str:
    """``text`` as help and listings show a manifest's words (a description, a ``run``):
    the mask when it has a token shape, as ``config show`` prints it; else one line (its
    line breaks and the blanks around them one space) with every control character shown
    as an escape (:func:`fdl._text.printable`), piped or not."""
    if token_kind(text) is not None:
        return MASK
    from fdl._text import printable

    flat = " ".join(text.split()) if not text.isprintable() else text
    return printable(flat, 2000)


def looks_secret(value: object) -> bool:
    """True when ``value`` (a string, or a list or mapping holding one) has a token shape."""
    if isinstance(value, str):
        return token_kind(value) is not None
    if isinstance(value, dict):
        return any(looks_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(looks_secret(v) for v in value)
    return False


def is_secret_path(path: tuple[str, ...]) -> bool:
    """True when any key on the path names a secret."""
    return any(is_secret_key(key) for key in path)


def is_secret_node(node: Node | None) -> bool:
    """True when the node, or anything inside it, is tagged ``!secret``."""
    if node is None:
        return False
    if node.tag == TAG_SECRET:
        return True
    if isinstance(node, MapNode):
        return any(is_secret_node(child) for child in node.entries.values())
    if isinstance(node, SeqNode):
        return any(is_secret_node(child) for child in node.items)
    return False


def mask(value: object) -> object:
    """``value`` with every scalar replaced by the mask (structure kept)."""
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return None if value is None else MASK


def redact(text: str) -> str:
    """``text`` with every token-shaped part replaced by the mask (for error messages,
    which quote the offending value whatever its key is called)."""
    for kind, _needles, pattern in TOKEN_SHAPES:
        text = _pattern(kind, pattern).sub(MASK, text)
    return text
