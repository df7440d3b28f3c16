"""Text and JSON views of a manifest: ``config show``, ``config explain``, ``config layers``."""

from __future__ import annotations

import math

from fdl.manifest._explain import Contribution, Explanation
from fdl.manifest._layers import Candidate
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode, dotted
from fdl.manifest._secrets import (
    MASK,
    is_secret_key,
    is_secret_node,
    is_secret_path,
    looks_secret,
    mask,
    token_kind,
)
from fdl.manifest._yaml import resolve_plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

INLINE_WIDTH = 80
MAX_COMMENT_COLUMN = 72
_PLAIN_UNSAFE_START = tuple("!&*>|%@`[]{},-?#'\" :")
_PLAIN_UNSAFE = (": ", " #", "\n", "\t", "\r", ",", "[", "]", "{", "}")


def format_scalar(value: object) -> str:
    """A scalar as YAML text that reads back as the same value."""
    if type(value) is str:  # the common case, asked first
        text = value
    elif value is None:
        return "null"
    elif value is True:
        return "true"
    elif value is False:
        return "false"
    elif isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    elif isinstance(value, int):
        return str(value)
    else:
        text = str(value)
    if (
        text
        and not text.startswith(_PLAIN_UNSAFE_START)
        and not text.endswith((" ", ":"))
        and not _has_unsafe(text)
        and resolve_plain(text) == text
        and text.isprintable()
    ):
        return text
    return _quoted(text)


def _quoted(text: str) -> str:
    """``text`` as a double-quoted YAML (and JSON) string: ``json.dumps(text,
    ensure_ascii=False)``, by the function json itself calls for it, without importing
    json's encoder and decoder (2 ms of `config show`'s start)."""
    try:
        from _json import encode_basestring
    except ImportError:  # pragma: no cover - an interpreter without CPython's accelerator
        from json.encoder import py_encode_basestring as encode_basestring
    return str(encode_basestring(text))


def _has_unsafe(text: str) -> bool:
    """Whether ``text`` holds a sequence that a plain YAML scalar cannot (a loop: this
    runs for every value ``config show`` and ``config explain`` print)."""
    for bad in _PLAIN_UNSAFE:  # noqa: SIM110 (any() over a generator is slower here)
        if bad in text:
            return True
    return False


def _scalar_text(node: ScalarNode, secret: bool) -> str:
    if secret and node.value is not None:
        return _quoted(MASK)
    if not isinstance(node.value, str) and node.raw is not None and node.raw.strip():
        raw = node.raw.strip()
        if resolve_plain(raw) == node.value or isinstance(node.value, float):
            return raw
    return format_scalar(node.value)


def _inline(node: Node, secret: bool) -> str | None:
    """A flow rendering of a list of scalars, or None when it does not apply."""
    if isinstance(node, ScalarNode):
        return _scalar_text(node, secret)
    if isinstance(node, SeqNode) and all(isinstance(i, ScalarNode) for i in node.items):
        sources = {i.origin.source for i in node.items}
        if len(sources) <= 1:
            parts = [_scalar_text(i, secret) for i in node.items]  # type: ignore[arg-type]
            return "[" + ", ".join(parts) + "]"
    if isinstance(node, MapNode) and not node.entries:
        return "{}"
    return None


def _origin_label(origin: Origin) -> str:
    return origin.short


def _key_text(key: str) -> str:
    text = format_scalar(key)
    return text if text == key else _quoted(key)


def render_show(tree: MapNode, *, origins: bool = True, show_secrets: bool = False) -> str:
    """The merged manifest as YAML, leaves annotated with ``# file:line``."""
    show = _Show(show_secrets)
    show.map_rows(tree, 0, False)
    rows = show.rows
    if not origins:
        return "".join(body + "\n" for body, _ in rows)
    widths = [len(body) for body, label in rows if label and len(body) < MAX_COMMENT_COLUMN]
    column = max([*widths, 12]) + 2
    out = []
    for body, label in rows:
        if label:
            pad = max(column - len(body), 2)
            out.append(f"{body}{' ' * pad}# {label}\n")
        else:
            out.append(body + "\n")
    return "".join(out)


class _Show:
    """One rendering: its rows, whether secrets are shown, and what it has learnt: which
    keys name a secret, which nodes hold a token-shaped value (asked of every mapping and
    again of everything inside it)."""

    __slots__ = ("keys", "rows", "show_secrets", "tokens")

    def __init__(self, show_secrets: bool) -> None:
        self.show_secrets = show_secrets
        self.rows: list[tuple[str, str]] = []
        self.keys: dict[str, bool] = {}
        self.tokens: dict[int, bool] = {}  # id(node): the tree outlives the rendering

    def secret_key(self, key: str) -> bool:
        known = self.keys.get(key)
        if known is None:
            known = self.keys[key] = is_secret_key(key)
        return known

    def holds_token(self, node: Node) -> bool:
        """``looks_secret(node.plain())``, each node looked at once."""
        known = self.tokens.get(id(node))
        if known is None:
            known = False
            if isinstance(node, MapNode):
                for child in node.entries.values():
                    if self.holds_token(child):
                        known = True
                        break
            elif isinstance(node, SeqNode):
                for item in node.items:
                    if self.holds_token(item):
                        known = True
                        break
            elif isinstance(node, ScalarNode):
                known = looks_secret(node.value)
            else:
                known = looks_secret(node.plain())
            self.tokens[id(node)] = known
        return known

    def map_rows(self, node: MapNode, indent: int, secret: bool) -> None:
        pad = " " * indent
        for key, child in node.entries.items():
            hidden = not self.show_secrets and (
                secret or self.secret_key(key) or child.tag == "!secret" or self.holds_token(child)
            )
            label = _origin_label(child.origin)
            inline = _inline(child, hidden)
            if inline is not None and len(pad) + len(key) + len(inline) + 2 <= INLINE_WIDTH:
                self.rows.append((f"{pad}{_key_text(key)}: {inline}", label))
            elif isinstance(child, MapNode):
                self.rows.append((f"{pad}{_key_text(key)}:", ""))
                self.map_rows(child, indent + 2, hidden)
            elif isinstance(child, SeqNode):
                self.rows.append((f"{pad}{_key_text(key)}:", ""))
                self.seq_rows(child, indent + 2, hidden)
            else:
                assert isinstance(child, ScalarNode)
                self.rows.append((f"{pad}{_key_text(key)}: {_scalar_text(child, hidden)}", label))

    def seq_rows(self, node: SeqNode, indent: int, secret: bool) -> None:
        pad = " " * indent
        for item in node.items:
            hidden = secret or (
                not self.show_secrets and (item.tag == "!secret" or self.holds_token(item))
            )
            inline = _inline(item, hidden)
            if inline is not None:
                self.rows.append((f"{pad}- {inline}", _origin_label(item.origin)))
            elif isinstance(item, MapNode):
                # the mapping's first row carries the dash (a non-empty mapping: an empty
                # one is inline)
                first = len(self.rows)
                self.map_rows(item, indent + 2, hidden)
                body, label = self.rows[first]
                self.rows[first] = (f"{pad}- {body.lstrip()}", label)
            else:
                assert isinstance(item, SeqNode)
                self.rows.append((f"{pad}-", ""))
                self.seq_rows(item, indent + 2, hidden)


def show_data(tree: MapNode, *, show_secrets: bool = False) -> Any:
    """The merged manifest as plain data with secrets masked (for ``--json``)."""
    return _masked_plain(tree, show_secrets, False)


def _masked_plain(node: Node, show_secrets: bool, secret: bool) -> Any:
    hidden = secret or (
        not show_secrets
        and (node.tag == "!secret" or (isinstance(node, ScalarNode) and looks_secret(node.value)))
    )
    if isinstance(node, MapNode):
        return {
            key: _masked_plain(
                child, show_secrets, hidden or (not show_secrets and is_secret_key(key))
            )
            for key, child in node.entries.items()
        }
    if isinstance(node, SeqNode):
        return [_masked_plain(item, show_secrets, hidden) for item in node.items]
    value = node.plain()
    return mask(value) if hidden else value


# --- explain ---------------------------------------------------------------

_ACTION_WORDS = {
    "set": "set by",
    "append": "appended",
    "delete": "deleted by",
    "replace-ancestor": "replaced by",
    "removed-by-replace": "removed by",
}


def _is_secret(explanation: Explanation, secret_keys: dict[str, bool] | None = None) -> bool:
    """Whether the explanation shows a secret; ``secret_keys`` remembers
    :func:`is_secret_key` across the explanations of one rendering (their paths share keys)."""
    if secret_keys is None:
        if is_secret_path(explanation.path):
            return True
    else:
        for key in explanation.path:
            known = secret_keys.get(key)
            if known is None:
                known = secret_keys[key] = is_secret_key(key)
            if known:
                return True
    # A token-shaped value is a secret whatever its key is called (deploy refuses it too).
    value = explanation.value
    if _looks_secret(value):
        return True
    for contributions in (explanation.live, explanation.overridden):
        for contribution in contributions:
            node = contribution.node
            if node is not None and (
                node.tag == "!secret" or (not isinstance(node, ScalarNode) and is_secret_node(node))
            ):
                return True
            # The winner's value is usually the final value itself: no need to look twice.
            if contribution.value is not value and _looks_secret(contribution.value):
                return True
    return False


def _looks_secret(value: object) -> bool:
    """:func:`looks_secret`, a text (the most common value) asked directly."""
    if type(value) is str:
        return token_kind(value) is not None
    return looks_secret(value)


def _value_text(value: object, secret: bool) -> str:
    if type(value) is str and not secret:  # the most common value first
        return format_scalar(value)
    if secret:
        value = mask(value)
    if isinstance(value, (dict, list)):
        import json

        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:57] + "..."
    return format_scalar(value)


_LAYER_SUFFIX: dict[LayerKind, str] = {}  # what follows an origin, made once per kind


def _layer_suffix(layer: LayerKind) -> str:
    """``"  (inherited)"`` after a file's origin; nothing after a variable or ``--set``."""
    suffix = _LAYER_SUFFIX.get(layer)
    if suffix is None:
        suffix = "" if layer in (LayerKind.ENV, LayerKind.SET) else f"  ({layer.value})"
        _LAYER_SUFFIX[layer] = suffix
    return suffix


def _contribution_text(contribution: Contribution, secret: bool, with_value: bool) -> str:
    where = str(contribution.origin) + _layer_suffix(contribution.origin.layer)
    if contribution.action in ("replace-ancestor", "removed-by-replace"):
        return f"{dotted(contribution.at)} at {where}"
    if not with_value:
        return where
    return f"{_value_text(contribution.value, secret)}  {where}"


def render_explain(explanations: list[Explanation], *, show_secrets: bool = False) -> str:
    """Every explanation as a block of text."""
    blocks = []
    secret_keys: dict[str, bool] = {}
    for item in explanations:
        secret = not show_secrets and _is_secret(item, secret_keys)
        lines = []
        if item.present:
            lines.append(f"{dotted(item.path)} = {_value_text(item.value, secret)}")
            for index, contribution in enumerate(item.live):
                word = _ACTION_WORDS[contribution.action] if index == 0 else "appended onto"
                if contribution.action == "delete":
                    word = "set empty by"
                with_value = len(item.live) > 1
                lines.append(f"  {word:<14}{_contribution_text(contribution, secret, with_value)}")
        else:
            lines.append(f"{dotted(item.path)}  (removed)")
            if item.removed_by is not None:
                word = _ACTION_WORDS[item.removed_by.action]
                lines.append(f"  {word:<14}{_contribution_text(item.removed_by, secret, False)}")
        for index, contribution in enumerate(item.overridden):
            word = ("was" if not item.present else "overrode") if index == 0 else ""
            lines.append(f"  {word:<14}{_contribution_text(contribution, secret, True)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + ("\n" if blocks else "")


def _origin_data(origin: Origin) -> dict[str, Any]:
    return {
        "source": origin.source,
        "file": str(origin.path) if origin.path else None,
        "line": origin.line or None,
        "column": origin.column or None,
        "layer": origin.layer.value,
    }


def _contribution_data(contribution: Contribution, secret: bool) -> dict[str, Any]:
    value = mask(contribution.value) if secret else contribution.value
    return {
        "action": contribution.action,
        "key": dotted(contribution.at),
        "value": value,
        "origin": _origin_data(contribution.origin),
    }


def explain_data(
    explanations: list[Explanation], *, show_secrets: bool = False
) -> list[dict[str, Any]]:
    """Explanations as plain data (for ``--json``)."""
    out = []
    secret_keys: dict[str, bool] = {}
    for item in explanations:
        is_secret = _is_secret(item, secret_keys)
        secret = not show_secrets and is_secret
        winner = item.winner
        out.append(
            {
                "key": dotted(item.path),
                "present": item.present,
                "value": mask(item.value) if secret else item.value,
                "secret": is_secret,
                "winner": _contribution_data(winner, secret) if item.present and winner else None,
                "contributions": [_contribution_data(c, secret) for c in item.live],
                "overridden": [_contribution_data(c, secret) for c in item.overridden],
                "removed_by": _contribution_data(item.removed_by, secret)
                if item.removed_by
                else None,
            }
        )
    return out


def explain_json(explanations: list[Explanation], *, show_secrets: bool = False) -> str:
    """Each explanation as an item of ``config explain --json``'s list, what
    ``json.dumps(list, indent=2, ...)`` writes for it: ``",\n  "`` then its JSON, indented
    by two (:func:`json_list` makes the list of such pieces)."""
    import json

    parts = []
    for item in explain_data(explanations, show_secrets=show_secrets):
        text = json.dumps(item, indent=2, ensure_ascii=False, default=str)
        # JSON text has no raw line break inside a string: every one is indentation.
        parts.append(",\n  " + text.replace("\n", "\n  "))
    return "".join(parts)


class JsonList:
    """A ``write`` that takes pieces of :func:`explain_json` and hands ``out`` one JSON
    list, byte for byte ``json.dumps(items, indent=2, ...) + "\n"``, without holding the
    list or its text; :meth:`close` ends it."""

    __slots__ = ("first", "out")

    def __init__(self, out: Callable[[str], object]) -> None:
        self.out = out
        self.first = True

    def __call__(self, text: str) -> None:
        if text:
            if self.first:
                text = "[" + text[1:]  # the first item's "," opens the list instead
                self.first = False
            self.out(text)

    def close(self) -> None:
        self.out("[]\n" if self.first else "\n]\n")


def render_layers(candidates: list[Candidate], env: str | None) -> str:
    """The candidate files in precedence order, lowest first."""
    lines = [f"{'layer':<10} {'status':<9} source"]
    for candidate in candidates:
        if candidate.used:
            status = "used"
        elif candidate.exists:
            status = "present"
        else:
            status = "absent"
        kind = candidate.kind.value
        if candidate.kind is LayerKind.OVERLAY and candidate.used and env:
            kind = "overlay"
        note = f"  ({candidate.note})" if candidate.note else ""
        lines.append(f"{kind:<10} {status:<9} {candidate.source}{note}")
    return "\n".join(lines) + "\n"


def layers_data(candidates: list[Candidate]) -> list[dict[str, Any]]:
    """Candidates as plain data (for ``--json``)."""
    return [
        {
            "layer": c.kind.value,
            "source": c.source,
            "file": str(c.path) if c.path else None,
            "exists": c.exists,
            "used": c.used,
            "note": c.note or None,
        }
        for c in candidates
    ]
