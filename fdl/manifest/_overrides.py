"""The layers that are not files: ``FDL__A__B=value`` environment variables (and the
aliases that set one key), ``--set a.b=value`` options, a command's options as plain values,
and a file's layer moved under a key path (a recipe holds ``libtorch.build``'s keys)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from fdl.errors import ManifestError, UsageError
from fdl.manifest._layers import Layer
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode

__all__ = [
    "ENV_PREFIX",
    "MAX_KEY_SEGMENTS",
    "env_layer",
    "nested_layer",
    "set_layer",
    "value_layer",
]

ENV_PREFIX = "FDL__"


def _reorigin(node: Node, origin: Origin) -> Node:
    """A copy of ``node`` whose every origin is ``origin`` (env and --set values)."""
    if isinstance(node, MapNode):
        entries = {k: _reorigin(v, origin) for k, v in node.entries.items()}
        return MapNode(entries, origin, node.tag, dict.fromkeys(entries, origin))
    if isinstance(node, SeqNode):
        return SeqNode([_reorigin(i, origin) for i in node.items], origin, node.tag)
    assert isinstance(node, ScalarNode)
    return ScalarNode(node.value, origin, node.tag, node.raw)


# Keys deeper than this in --set / FDL__ are refused (a manifest nests far less;
# the bound keeps every recursive walk of the merged tree far from Python's limit).
MAX_KEY_SEGMENTS = 50


def _check_assignment(what: str, segments: list[str], texts: Sequence[str], fix: str) -> None:
    """Refuse keys deeper than :data:`MAX_KEY_SEGMENTS` and text that is not UTF-8.

    Raises:
        ManifestError: naming ``what`` (the variable or the ``--set`` option).
    """
    if len(what) > 80:
        what = what[:77] + "..."
    if len(segments) > MAX_KEY_SEGMENTS:
        raise ManifestError(
            f"{what}: key with {len(segments)} segments; fdl accepts at most {MAX_KEY_SEGMENTS}",
            hint=fix,
        )
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = text.encode("utf-8", "surrogateescape")[exc.start : exc.start + 1]
            raise ManifestError(
                f"{what}: byte {bad!r} at position {exc.start} is not UTF-8",
                hint=f"{fix}; fdl manifests and their overrides are UTF-8 text",
            ) from None


# A value YAML reads as a plain one-word scalar, whatever the word (`12.10`, `true`,
# `cu128`, `/opt/x`): no indicator first (`-`, `.`, `&`, `!`, `%`, `@`...), no space, colon,
# hash or bracket. The common FDL__ and --set value takes it without PyYAML (its import
# costs more than the rest of a command's start); tests/unit/test_manifest_properties.py
# holds it to the parser's answer.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_/+~][A-Za-z0-9_./+~=@%-]*\Z")


def _value_node(text: str, origin: Origin, what: str) -> Node:
    from fdl.manifest._yaml import is_huge_int, parse_yaml, resolve_plain

    if _PLAIN_WORD.match(text) and not is_huge_int(text):
        return ScalarNode(resolve_plain(text), origin, raw=text)
    try:
        node = parse_yaml(text, origin.source, origin.layer)
    except ManifestError as exc:
        raise ManifestError(
            f"{what}: cannot parse the value {text!r}: {exc.message}",
            hint="quote it as a YAML string, e.g. '\"a: b\"'",
        ) from None
    if node is None:
        node = ScalarNode(None, origin, raw=text)
    return _reorigin(node, origin)


def _insert(tree: MapNode, path: list[str], value: Node, origin: Origin) -> None:
    node = tree
    for key in path[:-1]:
        child = node.entries.get(key)
        if not isinstance(child, MapNode):
            child = MapNode({}, origin, None, {})
            node.entries[key] = child
            node.key_origins[key] = origin
        node = child
    node.entries[path[-1]] = value
    node.key_origins[path[-1]] = origin


def _match_key(below: Node | None, segment: str) -> str:
    """Map an environment variable segment (``CUDA_TEST``) to a manifest key."""
    lowered = segment.lower()
    if isinstance(below, MapNode):
        for candidate in (lowered, lowered.replace("_", "-"), segment):
            if candidate in below.entries:
                return candidate
    return lowered


def env_layer(
    environ: Mapping[str, str],
    merged: Node | None,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> Layer | None:
    """The layer made of ``FDL__A__B=value`` variables (sets ``a.b``), if any.

    Segments are lower-cased; ``_`` also matches ``-`` when the manifest
    already has such a key (``FDL__COMMANDS__CUDA_TEST__RUN`` -> ``commands.cuda-test.run``).
    ``aliases`` name other variables that set one key (``FDL_LIBTORCH_MIRROR`` sets
    ``libtorch.mirror``); they are applied after the ``FDL__`` ones.
    """
    names = sorted(n for n in environ if n.startswith(ENV_PREFIX) and len(n) > len(ENV_PREFIX))
    named = [(n, path) for n, path in (aliases or {}).items() if environ.get(n)]
    if not names and not named:
        return None
    tree = MapNode({}, Origin("environment", layer=LayerKind.ENV), None, {})
    for name in names:
        segments = name[len(ENV_PREFIX) :].split("__")
        if any(not s for s in segments):
            raise ManifestError(
                f"environment variable {name}: empty key segment",
                hint="separate keys with exactly two underscores: FDL__SECTION__KEY=value",
            )
        _check_assignment(
            f"environment variable {name}",
            segments,
            (name, environ[name]),
            f"fix or unset {name[:80]}",
        )
        origin = Origin(f"${name}", layer=LayerKind.ENV)
        keys: list[str] = []
        below = merged
        for segment in segments:
            key = _match_key(below, segment)
            keys.append(key)
            below = below.entries.get(key) if isinstance(below, MapNode) else None
        _insert(tree, keys, _value_node(environ[name], origin, f"${name}"), origin)
    for name, path in named:
        origin = Origin(f"${name}", layer=LayerKind.ENV)
        _insert(tree, list(path), ScalarNode(environ[name], origin, raw=environ[name]), origin)
    return Layer(LayerKind.ENV, "environment variables", None, tree)


def set_layer(assignments: Sequence[str]) -> Layer | None:
    """The layer made of ``--set a.b=value`` options, in command-line order.

    Raises:
        UsageError: an assignment without ``=`` or with an empty key segment.
    """
    if not assignments:
        return None
    tree = MapNode({}, Origin("--set", layer=LayerKind.SET), None, {})
    for text in assignments:
        key, sep, value = text.partition("=")
        segments = key.strip().split(".")
        if not sep or any(not s for s in segments):
            raise UsageError(
                f"--set {text!r}: expected KEY=VALUE with a dotted key",
                hint="e.g. `--set libtorch.build.jobs=4`",
            )
        try:
            _check_assignment(f"--set {key.strip()}", segments, (text,), "fix the --set option")
        except ManifestError as exc:
            raise UsageError(exc.message, hint=exc.hint) from None
        origin = Origin(f"--set {key.strip()}", layer=LayerKind.SET)
        _insert(tree, segments, _value_node(value, origin, f"--set {key}"), origin)
    return Layer(LayerKind.SET, "--set", None, tree)


def value_layer(
    kind: LayerKind, source: str, values: Mapping[tuple[str, ...], tuple[object, str | Origin]]
) -> Layer | None:
    """A layer of plain values: ``{key path: (value, where it was given)}``.

    A command's options become the top layer this way (``("libtorch", "build", "archs"):
    ("6.1;12.0", "--archs")``), so their values carry origins like every other value.
    """
    if not values:
        return None
    tree = MapNode({}, Origin(source, layer=kind), None, {})
    for path, (value, label) in values.items():
        origin = label if isinstance(label, Origin) else Origin(label, layer=kind)
        scalar = (
            value if value is None or isinstance(value, (str, int, float, bool)) else str(value)
        )
        _insert(tree, list(path), ScalarNode(scalar, origin), origin)
    return Layer(kind, source, None, tree)


def nested_layer(layer: Layer, under: tuple[str, ...]) -> Layer:
    """``layer`` with its mapping moved under the key path ``under`` (a recipe file holds
    the keys of ``libtorch.build``)."""
    root = layer.root
    for key in reversed(under):
        origin = root.origin if root is not None else Origin(layer.source, layer=layer.kind)
        entries = {key: root} if root is not None else {}
        root = MapNode(entries, origin, None, {key: origin} if root is not None else {})
    return Layer(layer.kind, layer.source, layer.path, root)
