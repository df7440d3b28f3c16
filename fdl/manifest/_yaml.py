"""YAML to :class:`Node` trees, with line/column origins.

Builds nodes from libyaml's event stream with an explicit stack (no
recursion, so hostile nesting cannot crash the interpreter) and resolves plain
scalars with the YAML 1.2 core schema: ``yes``/``no``/``on``/``off`` stay
strings and ``12.10`` keeps its text for version-like fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from fdl.errors import ManifestError
from fdl.manifest._nodes import (
    KNOWN_TAGS,
    TAG_SECRET,
    LayerKind,
    MapNode,
    Node,
    Origin,
    Scalar,
    ScalarNode,
    SeqNode,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import yaml

# PyYAML is imported by the functions that parse, not here: importing it costs more than
# the rest of `fdl config show`, which needs this module's scalar rules (resolve_plain)
# but, with the parse cache (fdl.manifest._parsed), seldom the parser.

MAX_DEPTH = 200
# Nodes that aliases may add to a document when expanded (a "billion laughs"
# alias bomb would otherwise be expanded by the merge until memory runs out).
MAX_ALIAS_NODES = 100_000
# Longest integer fdl converts: Python refuses to print (or parse) longer decimal
# integers (sys.int_info.default_max_str_digits), so a longer one is an error.
MAX_INT_DIGITS = 4300

_STD = "tag:yaml.org,2002:"
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_TRUE = frozenset({"true", "True", "TRUE"})
_BOOL_FALSE = frozenset({"false", "False", "FALSE"})
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


def _int_too_long(text: str) -> bool:
    """Whether an integer literal would exceed :data:`MAX_INT_DIGITS` decimal digits."""
    digits = len(text.lstrip("+-"))
    if text.startswith("0x"):
        return (digits - 2) * 4 > MAX_INT_DIGITS * 3.32  # 4 bits per hex digit
    if text.startswith("0o"):
        return (digits - 2) * 3 > MAX_INT_DIGITS * 3.32
    return digits > MAX_INT_DIGITS


def resolve_plain(text: str) -> Scalar:
    """The value of a plain (unquoted) scalar under the YAML 1.2 core schema.

    Integers longer than :data:`MAX_INT_DIGITS` digits stay text (see
    :func:`int_too_long_error`, which the parser raises for them).
    """
    # Every special value starts with one of these (a newline: `$` matches before a final
    # one, so the empty null matches "\n"); most text does not, and skips the patterns.
    if text and text[0] not in "~nNtTfF+-.0123456789\n":
        return text
    if text[:1] in ("+", "-") and text[1:2] not in ("", *"0123456789."):
        return text  # a sign is followed by a digit or a point in every number (`--flag`)
    if _NULL.match(text):
        return None
    if text in _BOOL_TRUE:
        return True
    if text in _BOOL_FALSE:
        return False
    if _INT10.match(text) or _INT8.match(text) or _INT16.match(text):
        if _int_too_long(text):
            return text
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return float("-inf") if text.startswith("-") else float("inf")
    if _NAN.match(text):
        return float("nan")
    return text


def is_huge_int(text: str) -> bool:
    """Whether ``text`` is an integer literal too long for fdl to convert."""
    if not text or text[0] not in "+-0123456789":  # what every integer pattern starts with
        return False
    if text[0] in "+-" and text[1:2] not in tuple("0123456789"):
        return False  # a sign is followed by a digit in every integer
    return bool(_INT10.match(text) or _INT8.match(text) or _INT16.match(text)) and _int_too_long(
        text
    )


def int_too_long_error(text: str, where: Origin | None) -> ManifestError:
    """The error for an integer longer than :data:`MAX_INT_DIGITS` digits."""
    return ManifestError(
        f"integer with {len(text)} characters is too long (fdl reads integers of at most "
        f"{MAX_INT_DIGITS} digits)",
        location=where.location() if where is not None else None,
        hint="quote the value to keep it as text, or shorten it",
    )


_EXPLICIT_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "float": (int, float),
    "bool": bool,
    "null": type(None),
}


def _explicit(tag: str, text: str, where: Origin) -> Scalar:
    """A scalar with an explicit standard tag such as ``!!str`` or ``!!int``."""
    kind = tag[len(_STD) :]
    if kind == "str":
        return text
    if is_huge_int(text):
        raise int_too_long_error(text, where)
    value = resolve_plain(text)
    wanted = _EXPLICIT_TYPES.get(kind)
    if wanted is None:
        raise ManifestError(
            f"tag !!{kind} is not supported in fdl manifests",
            location=where.location(),
            hint="use plain values, or !!str / !!int / !!float / !!bool / !!null",
        )
    if isinstance(value, bool) and kind in ("int", "float"):
        value = text  # make the check below fail with a clear message
    if not isinstance(value, wanted):
        raise ManifestError(
            f"{text!r} is not a valid !!{kind}", location=where.location(), hint="fix the value"
        )
    return float(value) if kind == "float" and isinstance(value, int) else value


class _Frame:
    """A mapping or sequence under construction."""

    __slots__ = ("anchor", "key", "merges", "node", "size")

    def __init__(self, node: Node, anchor: str | None) -> None:
        self.node = node
        self.size = 1  # nodes below this one once aliases are expanded, itself included
        self.anchor = anchor
        self.key: ScalarNode | None = None
        self.merges: list[tuple[Node, Origin]] = []


def _origin(mark: Any, source: str, layer: LayerKind, path: Path | None) -> Origin:
    return Origin(source, mark.line + 1, mark.column + 1, layer, path)


def _excerpt(lines: list[str], mark: yaml.Mark) -> str:
    shown = lines[mark.line] if 0 <= mark.line < len(lines) else ""
    return f"{mark.line + 1:>4} | {shown}\n     | {' ' * mark.column}^"


def syntax_error(
    exc: yaml.MarkedYAMLError, text: str, source: str, path: Path | None
) -> ManifestError:
    """A YAML syntax error as a located ManifestError with the line and a caret."""
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    if mark is None:
        return ManifestError(f"{source}: {problem}", hint="fix the YAML syntax")
    lines = text.splitlines()
    details = [_excerpt(lines, mark)]
    context = exc.context_mark
    if exc.context and context is not None and context.line != mark.line:
        details.append(f"{exc.context} that starts at line {context.line + 1}:")
        details.append(_excerpt(lines, context))
    from fdl.errors import Location

    return ManifestError(
        f"YAML syntax error: {problem}",
        location=Location(source, mark.line + 1, mark.column + 1, path),
        details="\n".join(details),
        hint="fix the YAML syntax at the marked position",
    )


def parse_yaml(text: str, source: str, layer: LayerKind, path: Path | None = None) -> Node | None:
    """Parse one YAML document into a node tree; None for an empty document.

    Raises:
        ManifestError: with file, line and column for syntax errors, unknown
            tags, duplicate keys, aliases to unknown anchors or too deep nesting.
    """
    import yaml

    try:
        return _compose(text, source, layer, path)
    except yaml.MarkedYAMLError as exc:
        raise syntax_error(exc, text, source, path) from None
    except yaml.YAMLError as exc:
        raise ManifestError(
            f"{source}: cannot parse YAML: {exc}", hint="fix the YAML syntax"
        ) from None


def _compose(text: str, source: str, layer: LayerKind, path: Path | None) -> Node | None:
    try:  # libyaml bindings are much faster; the pure parser is a fallback.
        from yaml import CSafeLoader as Loader
    except ImportError:  # pragma: no cover - depends on how PyYAML was built
        from yaml import SafeLoader as Loader  # type: ignore[assignment]

    loader = Loader(text)

    def events() -> Iterator[yaml.Event]:
        # get_event parses the next event and gives None after the last one (libyaml's
        # parser and the pure one alike): one call per event, not check_event's two.
        get_event = loader.get_event
        event = get_event()
        while event is not None:
            yield event
            event = get_event()

    try:
        return _Composer(source, layer, path).run(events())
    finally:
        loader.dispose()


class _Composer:
    def __init__(self, source: str, layer: LayerKind, path: Path | None) -> None:
        self.source = source
        self.layer = layer
        self.path = path
        self.anchors: dict[str, Node] = {}
        self.stack: list[_Frame] = []
        self.root: Node | None = None
        self.documents = 0
        self.sizes: dict[str, int] = {}  # anchor -> expanded size of its node
        self.alias_nodes = 0

    def where(self, event: yaml.Event) -> Origin:
        mark = event.start_mark
        if mark is None:
            return Origin(self.source, 0, 0, self.layer, self.path)
        return _origin(mark, self.source, self.layer, self.path)

    def fail(self, message: str, where: Origin, hint: str) -> ManifestError:
        return ManifestError(message, location=where.location(), hint=hint)

    def check_tag(self, tag: str | None, where: Origin) -> str | None:
        if tag is None or tag == "!" or tag.startswith(_STD):
            return tag
        if tag not in KNOWN_TAGS:
            raise self.fail(
                f"unknown tag {tag}",
                where,
                "fdl knows !append (lists), !replace (mappings) and !secret (values)",
            )
        return tag

    def run(self, events: Iterable[yaml.Event]) -> Node | None:
        import yaml

        # The event classes are disjoint: the most frequent are asked first.
        scalar_event = yaml.ScalarEvent
        for event in events:
            if isinstance(event, scalar_event):
                self.add(self.scalar(event), event)
            elif isinstance(event, yaml.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise self.fail(
                        "a manifest holds one YAML document, found a second one",
                        self.where(event),
                        "remove the `---` separator and merge the documents",
                    )
            elif isinstance(event, yaml.AliasEvent):
                target = self.anchors.get(event.anchor or "")
                if target is None:
                    raise self.fail(
                        f"alias *{event.anchor} refers to no anchor",
                        self.where(event),
                        f"define &{event.anchor} before using it",
                    )
                self.count_alias(event)
                self.add(target, event)
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                self.open(event, mapping=isinstance(event, yaml.MappingStartEvent))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                self.close()
        return self.root

    def count_alias(self, event: yaml.AliasEvent) -> None:
        """Count the nodes the alias adds; refuse beyond :data:`MAX_ALIAS_NODES`."""
        size = self.sizes.get(event.anchor or "", 1)
        self.alias_nodes += size
        if self.alias_nodes > MAX_ALIAS_NODES:
            raise self.fail(
                f"aliases expand to more than {MAX_ALIAS_NODES:,} values "
                f"(*{event.anchor} alone adds {size:,})",
                self.where(event),
                "use fewer nested aliases; write the repeated values out or use inherit-from",
            )
        if self.stack:
            self.stack[-1].size += size

    def scalar(self, event: yaml.ScalarEvent) -> ScalarNode:
        where = self.where(event)
        tag = self.check_tag(event.tag, where)
        text = event.value
        value: Scalar
        plain = event.style is None or event.style == ""
        if tag is not None and tag.startswith(_STD):
            value = _explicit(tag, text, where)
        elif (plain and event.implicit[0]) or (tag == TAG_SECRET and plain):
            value = resolve_plain(text)
            if value is text and is_huge_int(text):
                raise int_too_long_error(text, where)
        else:
            value = text
        node = ScalarNode(value, where, tag if tag in KNOWN_TAGS else None, raw=text)
        if event.anchor:
            self.anchors[event.anchor] = node
            self.sizes[event.anchor] = 1
        if self.stack:
            self.stack[-1].size += 1
        return node

    def open(self, event: yaml.CollectionStartEvent, *, mapping: bool) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise self.fail(
                f"nesting deeper than {MAX_DEPTH} levels",
                self.where(event),
                "flatten the structure",
            )
        where = self.where(event)
        tag = self.check_tag(event.tag, where)
        tag = tag if tag in KNOWN_TAGS else None
        node: Node
        if mapping:
            node = MapNode({}, where, tag, {})
        else:
            node = SeqNode([], where, tag)
        frame = _Frame(node, event.anchor)
        self.stack.append(frame)

    def close(self) -> None:
        frame = self.stack.pop()
        node = frame.node
        if node.tag == TAG_SECRET:
            _secret_inside(node)
        if isinstance(node, MapNode) and frame.merges:
            self.apply_merge_keys(node, frame.merges)
        if frame.anchor:
            self.anchors[frame.anchor] = node
            self.sizes[frame.anchor] = frame.size
        if self.stack:
            self.stack[-1].size += frame.size
        self.add(node, None)

    def apply_merge_keys(self, node: MapNode, merges: list[tuple[Node, Origin]]) -> None:
        """YAML ``<<: *base`` merge keys: explicit keys win over merged ones."""
        merged: dict[str, Node] = {}
        origins: dict[str, Origin] = {}
        for value, where in merges:
            sources = value.items if isinstance(value, SeqNode) else [value]
            for source in sources:
                if not isinstance(source, MapNode):
                    raise self.fail(
                        "the merge key << needs a mapping or a list of mappings",
                        where,
                        "write `<<: *anchor` where &anchor names a mapping",
                    )
                for key, child in source.entries.items():
                    if key not in merged:
                        merged[key] = child
                        origins[key] = source.key_origin(key)
        for key, child in node.entries.items():
            merged[key] = child
            origins[key] = node.key_origins[key]
        node.entries = merged
        node.key_origins = origins

    def add(self, node: Node, event: yaml.Event | None) -> None:
        if not self.stack:
            self.root = node
            return
        frame = self.stack[-1]
        parent = frame.node
        if isinstance(parent, SeqNode):
            parent.items.append(node)
            return
        assert isinstance(parent, MapNode)
        if frame.key is None:
            if not isinstance(node, ScalarNode):
                raise self.fail(
                    "mapping keys must be plain text, not lists or mappings",
                    node.origin,
                    "quote the key or restructure the mapping",
                )
            frame.key = node
            return
        key_node, frame.key = frame.key, None
        key = key_node.text
        if key == "<<" and key_node.raw == "<<":
            frame.merges.append((node, key_node.origin))
            return
        if key in parent.entries:
            first = parent.key_origins[key]
            raise self.fail(
                f"duplicate key {key!r} (first defined at line {first.line})",
                key_node.origin,
                "keep one of the two entries",
            )
        parent.entries[key] = node
        parent.key_origins[key] = key_node.origin


def _secret_inside(node: Node) -> None:
    """``!secret`` on a list or mapping: every value inside is a secret. The tag goes on
    each scalar, since merging and materialising keep a scalar's tag but not a
    collection's (a `args: !secret [--token, X]` was printed by `config show`)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ScalarNode):
            if current.tag is None:
                current.tag = TAG_SECRET
        elif isinstance(current, MapNode):
            stack.extend(current.entries.values())
        elif isinstance(current, SeqNode):
            stack.extend(current.items)
