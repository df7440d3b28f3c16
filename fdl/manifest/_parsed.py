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

import marshal
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
    entry = entry_path(path, source)
    if entry is None:
        return _parse(text, source, layer, path)
    key = (FORMAT, __version__, source, layer.value, str(path), text)
    kept = _read(entry)
    if kept is not None and kept[:6] == key:
        try:
            return _decode(kept[6], source, layer, path)
        except (TypeError, ValueError, IndexError, KeyError):
            pass  # not a tree this module wrote: parse again, and overwrite it
    tree = _parse(text, source, layer, path)
    try:
        data = marshal.dumps((*key, _encode(tree, source, layer, path)))  # type: ignore[arg-type]
    except (_NotKept, ValueError, RecursionError):
        return tree
    if len(data) <= MAX_ENTRY_BYTES:
        _keep(entry, data)
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


def _read(entry: Path) -> tuple[object, ...] | None:
    """The tuple an entry holds; None when there is none or it is not one fdl wrote."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        handle = os.open(entry, flags)
    except OSError:
        return None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            return None
        with open(handle, "rb", closefd=False) as stream:
            data = stream.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(handle)
    if len(data) > MAX_ENTRY_BYTES:
        return None
    try:
        kept = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    return kept if isinstance(kept, tuple) and len(kept) == 7 else None


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


def _keep(entry: Path, data: bytes) -> None:
    """Write the entry (atomically, 0600); any failure only means no entry.

    Only into fdl's own cache (the ``CACHEDIR.TAG`` fdl writes; a ``FDL_CACHE_DIR`` that
    names a directory of the user's gets nothing) and a real directory, not a link.
    """
    import stat

    from fdl.paths import is_own_cache, own_cache_dir

    temporary = entry.with_name(f".{entry.name}.{os.getpid()}")
    try:
        if not is_own_cache(own_cache_dir(entry.parent.parent)):
            return
        entry.parent.mkdir(mode=0o700, exist_ok=True)
        if not stat.S_ISDIR(os.lstat(entry.parent).st_mode):
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        handle = os.open(temporary, flags, 0o600)
        with open(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, entry)
        _prune(entry.parent)
    except OSError:
        _unlink(temporary)


def _prune(directory: Path) -> None:
    """Keep the newest :data:`MAX_ENTRIES` entries (a temporary file a killed writer left
    counts too, and goes first when it is the oldest); files of other names are left."""
    import re

    ours = re.compile(r"\.?[0-9a-f]{8}\.marshal(?:\.[0-9]+)?")
    entries = []
    with os.scandir(directory) as listing:
        for item in listing:
            if ours.fullmatch(item.name) and item.is_file(follow_symlinks=False):
                entries.append((item.stat(follow_symlinks=False).st_mtime_ns, item.path))
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort()
    for _, name in entries[: len(entries) - MAX_ENTRIES]:
        _unlink(name)


def _unlink(name: str | Path) -> None:
    import contextlib

    with contextlib.suppress(OSError):
        os.unlink(name)
