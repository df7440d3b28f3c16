"""Deep merge of manifest layers.

Each layer is a *patch* over the layers below it:

- mappings merge key by key (keys keep their first position, new keys go after);
- scalars and lists replace what is below;
- ``null`` deletes the key when a layer below defines it, and is an empty value
  when nothing below defines it (so ``sub:`` in the base stays an entry);
- ``!append`` concatenates a list onto the list below;
- ``!replace`` replaces a mapping wholesale instead of merging into it.

:func:`compose` combines two patches into one patch, so merging is associative
(tested with hypothesis); :func:`materialize` applies a patch to nothing and
yields the final tree. Inputs are never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable

from fdl.manifest._nodes import (
    TAG_APPEND,
    TAG_REPLACE,
    MapNode,
    Node,
    Origin,
    SeqNode,
    is_null,
)


class DeletedNode(Node):
    """A tombstone: the key was deleted by the layer at ``origin``."""

    __slots__ = ()

    def plain(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"DeletedNode(@ {self.origin})"


def compose(lower: Node | None, upper: Node) -> Node:
    """The patch equivalent to applying ``lower`` then ``upper``."""
    if isinstance(upper, DeletedNode):
        return upper
    if is_null(upper):
        if lower is None or is_null(lower):
            return upper
        if isinstance(lower, DeletedNode):
            return lower
        return DeletedNode(upper.origin)
    if isinstance(upper, SeqNode) and upper.tag == TAG_APPEND:
        if isinstance(lower, SeqNode):
            return SeqNode(lower.items + upper.items, upper.origin, lower.tag)
        if lower is None:
            return upper
        return SeqNode(list(upper.items), upper.origin, None)
    if isinstance(upper, MapNode) and upper.tag != TAG_REPLACE:
        if isinstance(lower, MapNode):
            entries = dict(lower.entries)
            key_origins = dict(lower.key_origins)
            for key, child in upper.entries.items():
                entries[key] = compose(entries.get(key), child)
                key_origins[key] = upper.key_origins.get(key, child.origin)
            return MapNode(entries, lower.origin, lower.tag, key_origins)
        if lower is None:
            return upper
    return absolute(upper)


def absolute(node: Node) -> Node:
    """``node`` applied onto nothing, as a patch that ignores what is below."""
    if isinstance(node, MapNode):
        entries: dict[str, Node] = {}
        key_origins: dict[str, Origin] = {}
        for key, child in node.entries.items():
            if isinstance(child, DeletedNode):
                continue
            entries[key] = absolute(child)
            key_origins[key] = node.key_origins.get(key, child.origin)
        return MapNode(entries, node.origin, TAG_REPLACE, key_origins)
    if isinstance(node, SeqNode) and node.tag == TAG_APPEND:
        return SeqNode(node.items, node.origin, None)
    return node


def materialize(patch: Node | None) -> Node | None:
    """The final value of a patch applied onto nothing, without merge tags."""
    if patch is None or isinstance(patch, DeletedNode):
        return None
    return _strip(patch)


def _strip(node: Node) -> Node:
    if isinstance(node, MapNode):
        entries = {
            key: _strip(child)
            for key, child in node.entries.items()
            if not isinstance(child, DeletedNode)
        }
        origins = {key: node.key_origins.get(key, entries[key].origin) for key in entries}
        return MapNode(entries, node.origin, None, origins)
    if isinstance(node, SeqNode):
        return SeqNode([_strip(item) for item in node.items], node.origin, None)
    return node


def merge(layers: Iterable[Node | None]) -> Node | None:
    """Compose the layers lowest first, returning the combined patch."""
    result: Node | None = None
    for layer in layers:
        if layer is None:
            continue
        result = compose(result, layer)
    return result


def deletions(
    patch: Node | None, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Origin]]:
    """Paths deleted by some layer (tombstones left in the combined patch)."""
    out: list[tuple[tuple[str, ...], Origin]] = []
    if isinstance(patch, MapNode):
        for key, child in patch.entries.items():
            if isinstance(child, DeletedNode):
                out.append(((*prefix, key), child.origin))
            else:
                out.extend(deletions(child, (*prefix, key)))
    return out
