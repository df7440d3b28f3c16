"""``config explain``'s text, written straight from the layers.

``render_explain(explain_paths(...))`` makes a :class:`~fdl.manifest._explain.Contribution`
per layer and leaf and an :class:`~fdl.manifest._explain.Explanation` per leaf, then
renders them: with 10,000 commands over 20 layers, 250,000 objects made to be printed
once. Most stories are simple: every layer that writes the leaf writes a plain scalar
(no ``null``, no tag), none of them looks like a secret, and the leaf's parents are plain
mappings in every layer. :func:`write_explain` writes those lines from the layers' nodes
themselves, walking the merged tree beside the layers' mappings (once per mapping, not
once per leaf); every other story (``null``, ``!append``, ``!replace``, a mapping
replaced by a scalar, a secret) is told by ``explain_paths`` and ``render_explain``, as
are the leaves the merged manifest no longer holds. The text is byte for byte
``render_explain(explain_paths(layers, final, explainable_paths(layers, final, prefix)))``
(tests/unit/test_manifest_explain_scale.py).

``--json`` goes the same way (:class:`_JsonWalk`): a simple story is written as the JSON
``explain_data`` and ``json.dumps`` make of it (``explain_json``), straight from the nodes;
there every story that shows a secret goes the long way whether or not secrets are shown
(its ``"secret"`` is true).
"""

from __future__ import annotations

import math
from itertools import repeat

from fdl.manifest._explain import absent_paths, drop_covered, explain_paths
from fdl.manifest._nodes import (
    TAG_REPLACE,
    LayerKind,
    MapNode,
    Node,
    Origin,
    ScalarNode,
    node_at,
    walk_leaves,
)
from fdl.manifest._secrets import is_secret_key, token_kind
from fdl.manifest.render import (
    _layer_suffix,
    _looks_secret,
    explain_json,
    format_scalar,
    render_explain,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from fdl.manifest._explain import Explanation
    from fdl.manifest._layers import Layer

try:  # json.dumps(text, ensure_ascii=False), by the function json itself calls
    from _json import encode_basestring as _encode
except ImportError:  # pragma: no cover - an interpreter without CPython's accelerator
    from json.encoder import py_encode_basestring as _encode

_get = dict.get
_LINES = 4096  # lines held before they are written


def write_explain(
    layers: list[Layer],
    final: Node | None,
    prefix: tuple[str, ...],
    write: Callable[[str], object],
    *,
    show_secrets: bool = False,
    as_json: bool = False,
) -> bool:
    """Hand ``config explain``'s text of every leaf below ``prefix`` to ``write``, in
    pieces (``as_json``: the items of its JSON list, as :func:`explain_json` writes them);
    False (nothing written) when the merged node at ``prefix`` is not a non-empty
    mapping, or some layer holds anything but plain mappings on the way to it (the
    caller renders ``explain()`` instead)."""
    start = node_at(final, prefix) if final is not None else None
    if not (type(start) is MapNode and start.entries):
        return False
    holders: list[dict[str, Node]] = []
    for layer in layers:
        node = layer.root
        if type(node) is not MapNode:
            continue  # no layer at all, or not a mapping: it explains nothing below
        for key in prefix:
            node = node.entries.get(key)
            if node is None:
                break
            if type(node) is not MapNode or node.tag == TAG_REPLACE:
                return False
        if node is not None:
            holders.append(node.entries)
    walk = (_JsonWalk if as_json else _Walk)(layers, final, write, show_secrets)
    secret = walk.check and any(is_secret_key(key) for key in prefix)
    walk.mapping(start, prefix, holders, secret)
    absent = (
        absent_paths(layers, final, prefix) if walk.unsure else drop_covered(walk.absent_in_order())
    )
    if absent:
        walk.objects(absent)
    walk.flush()
    return True


def _plain_entries(written: list[Node]) -> list[dict[str, Node]] | None:
    """The entries of each mapping in ``written`` (what the layers write at a merged
    mapping); None when one is not a mapping or is tagged ``!replace``."""
    entries = []
    for node in written:
        if type(node) is not MapNode or node.tag == TAG_REPLACE:
            return None
        entries.append(node.entries)
    return entries


class _Walk:
    """One rendering: the lines not yet written, what was learnt about keys and values,
    and the leaves found absent from the merged manifest."""

    limit = _LINES  # lines held before they are written
    json = False  # secrets are looked for (and their stories go the long way) even if shown

    def __init__(
        self,
        layers: list[Layer],
        final: Node | None,
        write: Callable[[str], object],
        show_secrets: bool,
    ) -> None:
        self.layers = layers
        self.final = final
        self.write = write
        self.show_secrets = show_secrets
        self.check = not show_secrets or self.json
        self.lines: list[str] = []
        self.keys: dict[str, bool] = {}
        # a source -> its layer and what follows each origin in it (the layer asked by
        # identity: hashing the enum is a Python call)
        self.suffixes: dict[str, tuple[LayerKind, str]] = {}
        # (the JSON walk's) a source -> its layer, its file, and the JSON of an origin there
        # (at indent 4 and 6) before its line, between line and column, after the column
        self.origins: dict[str, tuple[LayerKind, Path | None, tuple[str, ...]]] = {}
        # a leaf path the merged manifest lacks -> the lowest layer that writes it
        self.absent: dict[tuple[str, ...], int] = {}
        # a story went to explain_paths whole: absent leaves may hide where this walk
        # did not look, and are looked for the long way
        self.unsure = False
        self.walked: dict[tuple[str, ...], list[Any]] = {}  # explain_paths' walks, kept

    def flush(self) -> None:
        if self.lines:
            self.write("".join(self.lines))
            self.lines.clear()

    def objects(self, paths: list[tuple[str, ...]]) -> None:
        """The stories of ``paths`` the long way (``explain_paths``, ``render_explain``)."""
        explained = explain_paths(self.layers, self.final, paths, self.walked)
        self.lines.append(self.render(explained))

    def render(self, explanations: list[Explanation]) -> str:
        """The stories told the long way, as text."""
        return render_explain(explanations, show_secrets=self.show_secrets)

    def settle(self, pending: list[tuple[int, tuple[str, ...]]]) -> None:
        """Tell the stories of the leaves ``pending`` (where each goes in the lines, its
        path) the long way, together (their parent is walked once)."""
        explained = explain_paths(self.layers, self.final, [p for _, p in pending], self.walked)
        for (at, _), explanation in zip(pending, explained, strict=True):
            self.lines[at] = self.render([explanation])
        pending.clear()

    def mapping(
        self, node: MapNode, path: tuple[str, ...], holders: list[dict[str, Node]], secret: bool
    ) -> None:
        """Every leaf below ``node`` (the merged mapping at ``path``); ``holders``: the
        entries of each layer's plain mapping there, lowest first; ``secret``: a key on
        ``path`` names a secret (and secrets are masked)."""
        name = ".".join(path) + "." if path else ""
        check = self.check
        limit = self.limit
        keys = self.keys
        lines = self.lines
        pending: list[tuple[int, tuple[str, ...]]] = []  # leaves told the long way
        found = 0  # holders' entries met below: fewer than they hold means some are gone
        for key, child in node.entries.items():
            # what each layer writes at key, lowest first (no layer index: asked only
            # when something is missing); filter(None) drops the misses, a node being
            # always true (no __len__, no __bool__)
            written: list[Node] = list(filter(None, map(_get, holders, repeat(key))))
            found += len(written)
            hidden = secret
            if check and not hidden:
                known = keys.get(key)
                if known is None:
                    known = keys[key] = is_secret_key(key)
                hidden = known
            if type(child) is MapNode and child.entries:
                if pending:
                    self.settle(pending)
                below = _plain_entries(written)
                if below is not None:  # one frame a level: as deep as the merge recurses
                    self.mapping(child, (*path, key), below, hidden)
                else:  # a layer replaces this mapping (by a scalar, or wholesale)
                    self.unsure = True
                    self.objects([leaf for leaf, _ in walk_leaves(child, (*path, key))])
            elif hidden or not self.leaf(name + key, child, written):
                for layer_child in written:
                    if type(layer_child) is MapNode and layer_child.entries:
                        self.unsure = True  # a layer's mapping the merged manifest made a leaf
                pending.append((len(lines), (*path, key)))
                lines.append("")  # its story, once told
            if len(lines) >= limit:
                if pending:
                    self.settle(pending)
                self.flush()
        if pending:
            self.settle(pending)
        if found != sum(map(len, holders)):
            self.missing(path, node.entries)

    def leaf(self, name: str, node: Node, written: list[Node]) -> bool:
        """Add the story of the leaf ``name`` (merged: ``node``; ``written``: what each
        layer writes there, lowest first) when it is a simple one; False when not."""
        if node is not written[-1]:
            return False  # the merged value is not the newest layer's node itself
        check = self.check
        suffixes = self.suffixes
        lines: list[str] = []
        word = "  overrode      "
        for index in range(len(written) - 1, -1, -1):
            child = written[index]
            if type(child) is not ScalarNode or child.tag is not None:
                return False
            value = child.value
            if value is None or (check and _looks_secret(value)):
                return False
            origin = child.origin
            source = origin.source
            known = suffixes.get(source)
            if known is None or known[0] is not origin.layer:
                known = suffixes[source] = (origin.layer, _layer_suffix(origin.layer))
            if origin.line:
                where = f"{source}:{origin.line}:{origin.column}{known[1]}"
            else:
                where = source + known[1]
            text = format_scalar(value)
            if lines:
                lines.append(f"{word}{text}  {where}\n")
                word = "                "
            else:
                lines.append(f"{name} = {text}\n  set by        {where}\n")
        self.lines += lines
        return True

    def missing(self, path: tuple[str, ...], entries: dict[str, Node]) -> None:
        """Note the leaves the layers write below the merged mapping at ``path``
        (``entries``) and that it lacks, with the lowest layer writing each."""
        absent = self.absent
        for index, layer in enumerate(self.layers):
            mapping = node_at(layer.root, path) if layer.root is not None else None
            if type(mapping) is not MapNode:
                continue
            for key, child in mapping.entries.items():
                if key not in entries:
                    for leaf, _ in walk_leaves(child, (*path, key)):
                        if leaf not in absent:
                            absent[leaf] = index

    def absent_in_order(self) -> list[tuple[str, ...]]:
        """The absent leaves in ``explainable_paths``'s order: by the lowest layer that
        writes each, then in that layer's order."""
        positions: dict[int, dict[str, int]] = {}  # id(mapping): where each key stands

        def order(item: tuple[tuple[str, ...], int]) -> tuple[int, list[int]]:
            leaf, index = item
            node = self.layers[index].root
            out = []
            for key in leaf:
                assert isinstance(node, MapNode)
                known = positions.get(id(node))
                if known is None:
                    known = positions[id(node)] = {k: n for n, k in enumerate(node.entries)}
                out.append(known[key])
                node = node.entries[key]
            return index, out

        return [leaf for leaf, _ in sorted(self.absent.items(), key=order)]


# what json.dumps(indent=2) writes around a contribution whose "{" is at indent 4 (the
# winner) or 6 (in a list), after its "key" (the leaf's), "value", origin's source
_CONTRIBUTION = {
    depth: (
        f'{{\n{" " * (depth + 2)}"action": "set",\n{" " * (depth + 2)}"key": ',
        f',\n{" " * (depth + 2)}"value": ',
    )
    for depth in (4, 6)
}


class _JsonWalk(_Walk):
    """The walk of ``config explain --json``: a leaf's story is one item of the list."""

    limit = 256  # items (of some KiB each with 20 layers) held before they are written
    json = True

    def render(self, explanations: list[Explanation]) -> str:
        return explain_json(explanations, show_secrets=self.show_secrets)

    def leaf(self, name: str, node: Node, written: list[Node]) -> bool:
        """Add the JSON of the leaf ``name`` (merged: ``node``; ``written``: what each
        layer writes there, lowest first) when its story is a simple one; False when not."""
        if node is not written[-1]:
            return False  # the merged value is not the newest layer's node itself
        origins = self.origins
        key = _encode(name)
        head4, value4 = _CONTRIBUTION[4]
        head6, value6 = _CONTRIBUTION[6]
        winner = ""
        value_text = ""
        listed: list[str] = []  # each layer's contribution in a list, newest first
        for index in range(len(written) - 1, -1, -1):
            child = written[index]
            if type(child) is not ScalarNode or child.tag is not None:
                return False
            text = _value_json(child.value)
            if text is None:
                return False
            origin = child.origin
            known = origins.get(origin.source)
            if known is None or known[0] is not origin.layer or known[1] is not origin.path:
                known = origins[origin.source] = (origin.layer, origin.path, _origin_json(origin))
            parts = known[2]
            line = str(origin.line) if origin.line else "null"
            column = str(origin.column) if origin.column else "null"
            if not winner:
                value_text = text
                winner = f"{head4}{key}{value4}{text}{parts[0]}{line}{parts[1]}{column}{parts[2]}"
            listed.append(f"{head6}{key}{value6}{text}{parts[3]}{line}{parts[4]}{column}{parts[5]}")
        overridden = (
            "[\n      " + ",\n      ".join(listed[1:]) + "\n    ]" if len(listed) > 1 else "[]"
        )
        self.lines.append(
            f',\n  {{\n    "key": {key},\n    "present": true,\n    "value": {value_text},'
            f'\n    "secret": false,\n    "winner": {winner},'
            f'\n    "contributions": [\n      {listed[0]}\n    ],'
            f'\n    "overridden": {overridden},'
            f'\n    "removed_by": null\n  }}'
        )
        return True


def _value_json(value: object) -> str | None:
    """A scalar as ``json.dumps`` writes it; None for null, a token-shaped text, and what
    json writes only with ``default=str`` (dates): those stories go the long way."""
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        return None if token_kind(value) is not None else _encode(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        assert isinstance(value, float)
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return None


def _origin_json(origin: Origin) -> tuple[str, ...]:
    """The JSON of an origin in ``origin``'s file, as a contribution's last entry (at
    indent 4, then 6): before its line, between line and column, after the column."""
    source = _encode(origin.source)
    file = _encode(str(origin.path)) if origin.path else "null"
    layer = _encode(origin.layer.value)
    out: list[str] = []
    for depth in (4, 6):
        inner, deeper = " " * (depth + 2), " " * (depth + 4)
        out += [
            f',\n{inner}"origin": {{\n{deeper}"source": {source},\n{deeper}"file": {file},'
            f'\n{deeper}"line": ',
            f',\n{deeper}"column": ',
            f',\n{deeper}"layer": {layer}\n{inner}}}\n{" " * depth}}}',
        ]
    return tuple(out)
