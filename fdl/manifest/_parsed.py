"""Parsed manifests kept between runs, so a command that reads an unchanged manifest does
not import or run the YAML parser.

Importing PyYAML costs more than the rest of ``fdl config show`` (its package loads the
constructor, resolver, emitter and representer modules, and their regexes, although fdl
uses only libyaml's event parser). A file's node tree is therefore kept in fdl's cache
(``<cache>/manifest/``) as ``marshal`` data beside the file's full text: an entry is used
only when the text read now is the same text, character for character, parsed for the
same source name and layer by the same fdl. Nothing is inferred from times or sizes, so an
edit, however quick, is always seen.

What is never kept: a tree holding a secret (a ``!secret`` value, a key that names one, a
value shaped like a token: fdl does not copy credentials out of the project), a tree that
shares a node (YAML aliases: kept trees are plain trees), and a tree bigger than
:data:`MAX_ENTRY_BYTES`. Entries are the user's own (0600, in a 0700 directory), read
without following links and within a size bound; one that is unreadable, of another
format or of another fdl is a miss. The directory keeps at most :data:`MAX_ENTRIES`
files (the least recently written go first). ``FDL_MANIFEST_CACHE=0`` turns it off.
"""

from __future__ import annotations

import os

from fdl import __version__
from fdl.manifest._nodes import (
    TAG_SECRET,
    LayerKind,
    MapNode,
    Node,
    Origin,
    ScalarNode,
    SeqNode,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_ENTRIES", "MAX_ENTRY_BYTES", "cached_parse", "entry_path"]

FORMAT = 1
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 32 * 1024 * 1024
_SCALAR, _SEQ, _MAP = 0, 1, 2


def cached_parse(text: str, source: str, layer: LayerKind, path: Path) -> Node | None:
    """The node tree of the YAML ``text`` read from ``path``: from the cache when this
    text was parsed before, else parsed now (and kept when it may be).

    Raises:
        ManifestError: as :func:`fdl.manifest._yaml.parse_yaml`.
    """
    from fdl._kept import keep, kept

    entry = entry_path(path, source)
    if entry is None:
        return _parse(text, source, layer, path)
    key = (FORMAT, __version__, source, layer.value, str(path), text)
    found = kept(entry, key, limit=MAX_ENTRY_BYTES)
    if found is not None:
        try:
            return _decode(found, source, layer, path)
        except (TypeError, ValueError, IndexError, KeyError, RecursionError):
            pass  # not a tree this module wrote: parse again, and overwrite it
    tree = _parse(text, source, layer, path)
    try:
        encoded = _encode(tree, source, layer, path)
    except (_NotKept, RecursionError):
        return tree
    keep(entry, key, encoded, limit=MAX_ENTRY_BYTES, max_entries=MAX_ENTRIES)
    return tree


def _parse(text: str, source: str, layer: LayerKind, path: Path) -> Node | None:
    from fdl.manifest._yaml import parse_yaml

    return parse_yaml(text, source, layer, path)


def entry_path(path: Path, source: str) -> Path | None:
    """The cache entry of the manifest file ``path`` shown as ``source``; None when the
    cache is off (``FDL_MANIFEST_CACHE=0``)."""
    if os.environ.get("FDL_MANIFEST_CACHE", "1") == "0":
        return None
    import zlib

    from fdl.paths import cache_dir

    name = zlib.crc32(os.fsencode(f"{path}\0{source}"))
    return cache_dir() / "manifest" / f"{name:08x}.marshal"


def _decode(data: object, source: str, layer: LayerKind, path: Path) -> Node | None:
    """A tree from what :func:`_encode` made (raises on anything else)."""
    if data is None:
        return None

    def origin(line: object, column: object) -> Origin:
        if type(line) is not int or type(column) is not int:
            raise TypeError("not a position")
        return Origin(source, line, column, layer, path)

    def node(item: object) -> Node:
        if not isinstance(item, tuple):
            raise TypeError("not a node")
        kind, line, column, tag = item[0], item[1], item[2], item[3]
        if tag is not None and not isinstance(tag, str):
            raise TypeError("not a tag")
        where = origin(line, column)
        if kind == _SCALAR:
            value, raw = item[4], item[5]
            if value is not None and type(value) not in (bool, int, float, str):
                raise TypeError("not a scalar")
            if raw is not None and not isinstance(raw, str):
                raise TypeError("not a text")
            return ScalarNode(value, where, tag, raw=raw)
        if kind == _SEQ:
            return SeqNode([node(child) for child in item[4]], where, tag)
        if kind == _MAP:
            entries: dict[str, Node] = {}
            origins: dict[str, Origin] = {}
            for key, key_line, key_column, child in item[4]:
                if not isinstance(key, str):
                    raise TypeError("not a key")
                entries[key] = node(child)
                origins[key] = origin(key_line, key_column)
            return MapNode(entries, where, tag, origins)
        raise ValueError("unknown node kind")

    return node(data)


class _NotKept(Exception):
    """The tree must not be kept (a secret, a shared node, a foreign origin)."""


def _encode(tree: Node | None, source: str, layer: LayerKind, path: Path) -> object:
    """``tree`` as nested tuples of plain values.

    Raises:
        _NotKept: the tree holds a secret or a shared node, or an origin of another file.
    """
    from fdl.manifest._secrets import is_secret_key, token_kind

    if tree is None:
        return None
    seen: set[int] = set()

    def position(where: Origin) -> tuple[int, int]:
        if (where.source, where.layer, where.path) != (source, layer, path):
            raise _NotKept()
        return where.line, where.column

    def encode(node: Node) -> tuple[object, ...]:
        if id(node) in seen or node.tag == TAG_SECRET:
            raise _NotKept()
        seen.add(id(node))
        line, column = position(node.origin)
        if isinstance(node, ScalarNode):
            for text in (node.value, node.raw):
                if isinstance(text, str) and token_kind(text) is not None:
                    raise _NotKept()
            return (_SCALAR, line, column, node.tag, node.value, node.raw)
        if isinstance(node, SeqNode):
            return (_SEQ, line, column, node.tag, tuple(encode(item) for item in node.items))
        assert isinstance(node, MapNode)
        entries = []
        for key, child in node.entries.items():
            if is_secret_key(key) or token_kind(key) is not None:
                raise _NotKept()
            entries.append((key, *position(node.key_origin(key)), encode(child)))
        return (_MAP, line, column, node.tag, tuple(entries))

    return encode(tree)
