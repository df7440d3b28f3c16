"""Which manifest values are secrets (masked unless --show-secrets)."""

from __future__ import annotations

import fnmatch
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
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_KEY_PATTERNS)


# Well-known shapes of credentials, by issuer: a value of this shape is a secret whatever
# the variable is called (GITHUB_PAT=ghp_... under any name). Sources: each issuer's
# documented token format (GitHub's token prefixes, GitLab's glpat-, AWS key ids, Hugging
# Face's hf_, PyPI's macaroon prefix, Slack's xox?-, npm's npm_, Google API keys,
# Stripe/OpenAI secret keys, PEM private keys).
# No word boundary before a prefix: a token glued to a word (`xghp_...`, `=ghp_...` pasted
# without its space) is still one.
TOKEN_SHAPES: tuple[tuple[str, str], ...] = (
    ("a GitHub token", r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("a GitLab token", r"gl(?:pat|dt|ptt|rt|oas)-[A-Za-z0-9_-]{20,}"),
    ("an AWS access key id", r"(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("a Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    ("a PyPI token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("a Slack token", r"xox[abposr]-[0-9A-Za-z-]{10,}"),
    ("an npm token", r"npm_[A-Za-z0-9]{36}\b"),
    ("a Google API key", r"AIza[0-9A-Za-z_-]{35}"),
    ("a Stripe secret key", r"[rs]k_live_[0-9A-Za-z]{20,}"),
    ("an OpenAI key", r"sk-(?:proj-)?[A-Za-z0-9_-]{32,}"),
    ("a private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    # https://user:password@host: only the user and password are the secret.
    ("a password in a URL", r"(?<=://)[^/\s:@]{1,256}:[^/\s@]{1,256}(?=@)"),
)
# Every text a shape above matches holds one of these (tests/unit/test_manifest_explain_scale.py
# checks it shape by shape): text holding none is no token, without twelve searches.
TOKEN_HINTS = ("_", "@", "IA", "AI", "gl", "pypi-", "xox", "sk-", "-----")
_compiled: list[tuple[str, re.Pattern[str]]] = []


def token_kind(value: str) -> str | None:
    """What kind of credential ``value`` looks like (``a GitHub token``), or None."""
    for hint in TOKEN_HINTS:
        if hint in value:
            break
    else:
        return None
    if not _compiled:
        _compiled.extend((kind, re.compile(pattern)) for kind, pattern in TOKEN_SHAPES)
    for kind, pattern in _compiled:
        if pattern.search(value):
            return kind
    return None


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
    token_kind("")  # compiles the shapes
    for _kind, pattern in _compiled:
        text = pattern.sub(MASK, text)
    return text
