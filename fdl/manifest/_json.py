"""JSON to :class:`Node` trees, with line/column origins.

The standard library parser forgets positions, so this is a small iterative
recursive-descent parser that reuses the standard library's string scanner.
"""

from __future__ import annotations

import bisect
import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path

from fdl.errors import Location, ManifestError
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode

_MAX_INT_DIGITS = 4300  # as fdl.manifest._yaml.MAX_INT_DIGITS (Python's conversion limit)

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
MAX_DEPTH = 200


class _Positions:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_col(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1


def parse_json(text: str, source: str, layer: LayerKind, path: Path | None = None) -> Node | None:
    """Parse a JSON document into a node tree; None when it is empty.

    Raises:
        ManifestError: located at the offending character.
    """
    parser = _Parser(text, source, layer, path)
    return parser.document()


class _Parser:
    def __init__(self, text: str, source: str, layer: LayerKind, path: Path | None) -> None:
        self.text = text
        self.source = source
        self.layer = layer
        self.path = path
        self.positions = _Positions(text)

    def origin(self, offset: int) -> Origin:
        line, col = self.positions.line_col(offset)
        return Origin(self.source, line, col, self.layer, self.path)

    def error(self, offset: int, message: str) -> ManifestError:
        line, col = self.positions.line_col(offset)
        lines = self.text.splitlines()
        shown = lines[line - 1] if 0 < line <= len(lines) else ""
        return ManifestError(
            f"JSON syntax error: {message}",
            location=Location(self.source, line, col, self.path),
            details=f"{shown}\n{' ' * (col - 1)}^",
            hint="fix the JSON syntax at the marked position",
        )

    def skip(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        assert match is not None
        return match.end()

    def document(self) -> Node | None:
        pos = self.skip(0)
        if pos == len(self.text):
            return None
        node, pos = self.value(pos)
        pos = self.skip(pos)
        if pos != len(self.text):
            raise self.error(pos, "extra data after the document")
        return node

    def scalar(self, pos: int) -> tuple[Node, int]:
        text = self.text
        char = text[pos]
        if char == '"':
            try:
                value, end = scanstring(text, pos + 1)
            except json.JSONDecodeError as exc:
                raise self.error(exc.pos, exc.msg) from None
            return ScalarNode(value, self.origin(pos), raw=value), end
        for word, literal in _LITERALS.items():
            if text.startswith(word, pos):
                return ScalarNode(literal, self.origin(pos), raw=word), pos + len(word)
        match = _NUMBER.match(text, pos)
        if match is None or match.end() == pos:
            raise self.error(pos, f"unexpected character {char!r}")
        raw = match.group(0)
        if not (match.group(1) or match.group(2)) and len(raw.lstrip("-")) > _MAX_INT_DIGITS:
            from fdl.manifest._yaml import int_too_long_error  # only on this error: yaml is slow

            raise int_too_long_error(raw, self.origin(pos))
        number: int | float = float(raw) if (match.group(1) or match.group(2)) else int(raw)
        return ScalarNode(number, self.origin(pos), raw=raw), match.end()

    def value(self, pos: int) -> tuple[Node, int]:
        """Parse one value starting at ``pos`` (iteratively for containers)."""
        text = self.text
        if pos >= len(text):
            raise self.error(pos, "unexpected end of document")
        if text[pos] not in "{[":
            return self.scalar(pos)
        # Each stack entry: (container node, pending key for mappings).
        stack: list[tuple[Node, str | None, Origin | None]] = []
        result: Node | None = None
        while True:
            pos = self.skip(pos)
            if pos >= len(text):
                raise self.error(pos, "unexpected end of document")
            char = text[pos]
            node: Node | None = None
            if char in "{[":
                if len(stack) >= MAX_DEPTH:
                    raise self.error(pos, f"nesting deeper than {MAX_DEPTH} levels")
                container: Node = (
                    MapNode({}, self.origin(pos), None, {})
                    if char == "{"
                    else SeqNode([], self.origin(pos))
                )
                stack.append((container, None, None))
                pos += 1
                pos = self.skip(pos)
                closing = "}" if char == "{" else "]"
                if pos < len(text) and text[pos] == closing:
                    node, _, _ = stack.pop()
                    pos += 1
                elif char == "{":
                    pos = self.key(stack, pos)
                    continue
                else:
                    continue
            else:
                node, pos = self.scalar(pos)
            # Attach the completed node, then consume separators and closers.
            while True:
                if not stack:
                    result = node
                    return result, pos
                parent, key, key_origin = stack[-1]
                if isinstance(parent, SeqNode):
                    parent.items.append(node)
                else:
                    assert isinstance(parent, MapNode) and key is not None and key_origin
                    if key in parent.entries:
                        first = parent.key_origins[key]
                        raise ManifestError(
                            f"duplicate key {key!r} (first defined at line {first.line})",
                            location=key_origin.location(),
                            hint="keep one of the two entries",
                        )
                    parent.entries[key] = node
                    parent.key_origins[key] = key_origin
                    stack[-1] = (parent, None, None)
                pos = self.skip(pos)
                closing = "]" if isinstance(parent, SeqNode) else "}"
                if pos < len(text) and text[pos] == ",":
                    pos += 1
                    if isinstance(parent, MapNode):
                        pos = self.key(stack, self.skip(pos))
                    break
                if pos < len(text) and text[pos] == closing:
                    node, _, _ = stack.pop()
                    pos += 1
                    continue
                raise self.error(pos, f"expected ',' or '{closing}'")

    def key(self, stack: list[tuple[Node, str | None, Origin | None]], pos: int) -> int:
        """Read ``"key":`` for the mapping on top of the stack."""
        text = self.text
        if pos >= len(text) or text[pos] != '"':
            raise self.error(pos, "expected a string key")
        key_origin = self.origin(pos)
        try:
            key, pos = scanstring(text, pos + 1)
        except json.JSONDecodeError as exc:
            raise self.error(exc.pos, exc.msg) from None
        pos = self.skip(pos)
        if pos >= len(text) or text[pos] != ":":
            raise self.error(pos, "expected ':' after the key")
        parent, _, _ = stack[-1]
        stack[-1] = (parent, key, key_origin)
        return pos + 1
