"""The schema language's base: :class:`Spec` (what every spec answers: check a node,
name its type, export JSON Schema) and :class:`Checker` (collects located problems while a
spec walks the merged tree, never quoting a secret). The specs are in
:mod:`fdl.manifest.schema`."""

from __future__ import annotations

import re

from fdl.errors import ManifestError
from fdl.manifest._nodes import MapNode, Node, ScalarNode, SeqNode, dotted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Checker", "LazyPattern", "Path", "Spec", "describe"]

Path = tuple[str, ...]


def describe(node: Node) -> str:
    """A short name for what a node holds (for type errors)."""
    if isinstance(node, MapNode):
        return "a mapping"
    if isinstance(node, SeqNode):
        return "a list"
    assert isinstance(node, ScalarNode)
    value = node.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({node.text})"
    if isinstance(value, int):
        return f"an integer ({node.text})"
    if isinstance(value, float):
        return f"a number ({node.text})"
    return f"a string ({value!r})" if len(value) < 40 else "a string"


class Checker:
    """Collects problems while a spec walks the merged tree."""

    def __init__(self) -> None:
        self.errors: list[ManifestError] = []

    def fail(self, node: Node, path: Path, message: str, hint: str | None = None) -> None:
        # An error quotes the value it refuses: never a secret's (by key or !secret tag),
        # never a token-shaped one whatever the key is called.
        from fdl.manifest._secrets import MASK, is_secret_node, is_secret_path, redact

        value = node.value if isinstance(node, ScalarNode) else None
        if isinstance(value, str) and value and (is_secret_path(path) or is_secret_node(node)):
            message = message.replace(repr(value), MASK).replace(value, MASK)
        message = redact(message)
        hint = redact(hint) if hint else hint
        self.errors.append(
            ManifestError(f"{dotted(path)}: {message}", location=node.origin.location(), hint=hint)
        )

    def wrong_type(self, node: Node, path: Path, spec: Spec) -> None:
        self.fail(node, path, f"expected {spec.type_name()}, got {describe(node)}")


class LazyPattern:
    """A regular expression compiled on first use.

    Building the root schema would otherwise compile ~40 patterns (~8 ms) on
    every manifest load, most of them for sections the manifest does not use.
    """

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def fullmatch(self, text: str) -> bool:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled.fullmatch(text) is not None


class Spec:
    """Base of all specs. ``check`` returns the normalised value."""

    description: str = ""

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        raise NotImplementedError

    def type_name(self) -> str:
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def _doc(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.description:
            schema["description"] = self.description
        return schema
