"""Which manifest values are secrets (masked unless --show-secrets)."""

from __future__ import annotations

import fnmatch

from fdl.manifest._nodes import TAG_SECRET, MapNode, Node, SeqNode

MASK = "***"
SECRET_KEY_PATTERNS = ("*token*", "*password*", "*passwd*", "*secret*", "*_key", "*-key")


def is_secret_key(key: str) -> bool:
    """True when the key's name says it holds a secret (case-insensitive)."""
    lowered = key.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_KEY_PATTERNS)


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
