"""Values that remember where they came from.

Every manifest value is parsed into a :class:`Node` carrying an :class:`Origin`
(file, line, column, layer). Layers are kept apart and merged on demand
(``_merge``), so each merged value still knows which layer won.
"""

from __future__ import annotations

from enum import Enum

from fdl.errors import Location

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

Scalar = None | bool | int | float | str

# Tags with a meaning for merging and display (see _merge and _secrets).
TAG_APPEND = "!append"
TAG_REPLACE = "!replace"
TAG_SECRET = "!secret"
KNOWN_TAGS = frozenset({TAG_APPEND, TAG_REPLACE, TAG_SECRET})


class LayerKind(str, Enum):
    """Where a layer comes from, in increasing precedence."""

    RECIPE = "recipe"  # a named defaults file below the manifest (libtorch.build.recipe)
    INHERITED = "inherited"
    BASE = "base"
    OVERLAY = "overlay"
    ENV = "env var"
    SET = "--set"
    FLAG = "command line"  # a command's own options (fdl libtorch build --archs)


class Origin:
    """Where a value was written.

    Attributes:
        source: Display name: a path relative to the project root
            (``fdl.ci.yml``, ``train/fdl.yml``), ``$FDL__A__B`` or ``--set a.b=1``.
        line: 1-based line, 0 when the source is not a file.
        column: 1-based column, 0 when the source is not a file.
        layer: The kind of layer the value belongs to.
        path: Absolute file path, when the source is a file.
    """

    __slots__ = ("column", "layer", "line", "path", "source")

    def __init__(
        self,
        source: str,
        line: int = 0,
        column: int = 0,
        layer: LayerKind = LayerKind.BASE,
        path: Path | None = None,
    ) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.layer = layer
        self.path = path

    def _key(self) -> tuple[str, int, int, LayerKind]:
        return (self.source, self.line, self.column, self.layer)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Origin):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Origin({str(self)!r}, {self.layer.value})"

    def __str__(self) -> str:
        if self.line:
            return f"{self.source}:{self.line}:{self.column}"
        return self.source

    @property
    def short(self) -> str:
        """``file:line`` (no column), as used in ``config show`` comments."""
        return f"{self.source}:{self.line}" if self.line else self.source

    def location(self) -> Location:
        """This origin as an error location."""
        return Location(self.source, self.line, self.column, self.path)


class Node:
    """A parsed value with its origin and optional merge/display tag."""

    __slots__ = ("origin", "tag")

    def __init__(self, origin: Origin, tag: str | None = None) -> None:
        self.origin = origin
        self.tag = tag

    def plain(self) -> object:
        """The value as plain Python data (dicts, lists, scalars)."""
        raise NotImplementedError


class ScalarNode(Node):
    """A scalar; ``raw`` keeps the source text (``12.10`` stays ``12.10``)."""

    __slots__ = ("raw", "value")

    def __init__(
        self, value: Scalar, origin: Origin, tag: str | None = None, raw: str | None = None
    ) -> None:
        super().__init__(origin, tag)
        self.value = value
        self.raw = raw

    def plain(self) -> Scalar:
        return self.value

    @property
    def text(self) -> str:
        """The source text when known, else the value rendered as text."""
        if self.raw is not None:
            return self.raw
        return "" if self.value is None else str(self.value)

    def __repr__(self) -> str:
        return f"ScalarNode({self.value!r} @ {self.origin})"


class SeqNode(Node):
    """A list of nodes."""

    __slots__ = ("items",)

    def __init__(self, items: list[Node], origin: Origin, tag: str | None = None) -> None:
        super().__init__(origin, tag)
        self.items = items

    def plain(self) -> list[object]:
        return [item.plain() for item in self.items]

    def __repr__(self) -> str:
        return f"SeqNode({len(self.items)} items @ {self.origin})"


class MapNode(Node):
    """A mapping from string keys to nodes, in source order.

    ``key_origins`` records where each key was written (used for errors about
    keys themselves, such as unknown keys).
    """

    __slots__ = ("entries", "key_origins")

    def __init__(
        self,
        entries: dict[str, Node],
        origin: Origin,
        tag: str | None = None,
        key_origins: dict[str, Origin] | None = None,
    ) -> None:
        super().__init__(origin, tag)
        self.entries = entries
        self.key_origins = key_origins if key_origins is not None else {}

    def plain(self) -> dict[str, object]:
        return {key: node.plain() for key, node in self.entries.items()}

    def key_origin(self, key: str) -> Origin:
        """Where ``key`` was written (falls back to the value's origin)."""
        found = self.key_origins.get(key)
        if found is not None:
            return found
        return self.entries[key].origin

    def __repr__(self) -> str:
        return f"MapNode({list(self.entries)} @ {self.origin})"


def is_null(node: Node | None) -> bool:
    """True for a null scalar (``key:``, ``key: null``): a layer deleting the key, and a
    key the schema reads as not set."""
    return isinstance(node, ScalarNode) and node.value is None


def is_set(node: MapNode, key: str) -> bool:
    """True when ``key`` is given in ``node`` with a value other than null."""
    child = node.entries.get(key)
    return child is not None and not is_null(child)


def walk_leaves(node: Node, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Node]]:
    """Every leaf (scalar or list) under ``node`` with its key path.

    Empty mappings count as leaves so that ``{}`` values stay visible.
    """
    out: list[tuple[tuple[str, ...], Node]] = []
    stack: list[tuple[tuple[str, ...], Node]] = [(prefix, node)]
    while stack:
        path, current = stack.pop()
        if isinstance(current, MapNode) and current.entries:
            for key in reversed(list(current.entries)):
                stack.append(((*path, key), current.entries[key]))
        else:
            out.append((path, current))
    return out


def node_at(node: Node, path: tuple[str, ...]) -> Node | None:
    """The node at ``path`` below ``node``, or None if any step is missing."""
    current: Node | None = node
    for key in path:
        if not isinstance(current, MapNode):
            return None
        current = current.entries.get(key)
        if current is None:
            return None
    return current


def dotted(path: tuple[str, ...]) -> str:
    """``('a', 'b')`` -> ``a.b``; the empty path is shown as ``(root)``."""
    return ".".join(path) if path else "(root)"
