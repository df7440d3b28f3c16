"""Property tests of the manifest engine (hypothesis)."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdl.errors import FdlError, ManifestError
from fdl.manifest._merge import compose, materialize, merge
from fdl.manifest._nodes import LayerKind, MapNode, Node, ScalarNode, SeqNode, walk_leaves
from fdl.manifest._yaml import parse_yaml
from fdl.manifest.render import format_scalar, render_show

KEYS = st.sampled_from(["a", "b", "c", "d"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(alphabet=string.ascii_letters + " :#'\"-", min_size=0, max_size=6),
)


def _values(depth: int) -> st.SearchStrategy[object]:
    leaf = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))
    if depth == 0:
        return leaf
    return st.one_of(leaf, st.dictionaries(KEYS, _values(depth - 1), max_size=3))


class Tagged:
    """A value with a merge tag, rendered as `!tag value` in YAML."""

    def __init__(self, tag: str, value: object) -> None:
        self.tag, self.value = tag, value


def _tagged_values(depth: int) -> st.SearchStrategy[object]:
    base = _values(depth)
    return st.one_of(
        base,
        st.lists(SCALARS, max_size=3).map(lambda v: Tagged("!append", v)),
        st.dictionaries(KEYS, _values(max(depth - 1, 0)), max_size=3).map(
            lambda v: Tagged("!replace", v)
        ),
    )


LAYER = st.dictionaries(KEYS, _tagged_values(2), max_size=4)


def to_yaml(value: object, indent: int = 0) -> str:
    """Block YAML for generated layers (flow for lists and scalars)."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for key, child in value.items():
            if isinstance(child, dict) and child:
                lines.append(f"{pad}{key}:\n{to_yaml(child, indent + 2)}")
            elif isinstance(child, Tagged) and isinstance(child.value, dict) and child.value:
                lines.append(f"{pad}{key}: {child.tag}\n{to_yaml(child.value, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {inline(child)}")
        return "\n".join(lines)
    return inline(value)


def inline(value: object) -> str:
    if isinstance(value, Tagged):
        return f"{value.tag} {inline(value.value)}"
    if isinstance(value, list):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {inline(v)}" for k, v in value.items()) + "}"
    return format_scalar(value)


def parse(layer: dict[str, object], name: str) -> Node | None:
    return parse_yaml(to_yaml(layer) + "\n", name, LayerKind.OVERLAY)


def value_of(patch: Node | None) -> object:
    result = materialize(patch)
    return result.plain() if result is not None else None


@settings(max_examples=300, deadline=None)
@given(LAYER, LAYER, LAYER)
def test_merging_is_associative(
    a: dict[str, object], b: dict[str, object], c: dict[str, object]
) -> None:
    na, nb, nc = parse(a, "a.yml"), parse(b, "b.yml"), parse(c, "c.yml")
    assert na is not None and nb is not None and nc is not None
    left = compose(compose(compose(None, na), nb), nc)
    right = compose(compose(None, na), compose(compose(None, nb), nc))
    assert value_of(left) == value_of(right)


@settings(max_examples=200, deadline=None)
@given(LAYER, KEYS)
def test_null_deletes(base: dict[str, object], key: str) -> None:
    if base.get(key) is None:
        base = {**base, key: 1}
    tree = value_of(
        merge([parse(base, "base.yml"), parse_yaml(f"{key}: null\n", "o.yml", LayerKind.OVERLAY)])
    )
    assert isinstance(tree, dict)
    assert key not in tree


@settings(max_examples=200, deadline=None)
@given(LAYER, LAYER)
def test_origins_point_at_a_line_holding_the_value(
    a: dict[str, object], b: dict[str, object]
) -> None:
    texts = {"a.yml": to_yaml(a) + "\n", "b.yml": to_yaml(b) + "\n"}
    patch = merge(parse_yaml(t, n, LayerKind.OVERLAY) for n, t in texts.items())
    result = materialize(patch)
    if not isinstance(result, MapNode):
        return
    for path, node in walk_leaves(result):
        items = node.items if isinstance(node, SeqNode) else [node]
        for item in items:
            if not isinstance(item, ScalarNode) or item.raw in (None, ""):
                continue
            line = texts[item.origin.source].splitlines()[item.origin.line - 1]
            at = line[item.origin.column - 1 :]
            # Plain scalars start with their text; quoted ones with their quote.
            assert at.startswith(item.raw) or at[:1] in ("'", '"'), (path, item, line)


@settings(max_examples=100, deadline=None)
@given(LAYER)
def test_show_output_reads_back_as_the_same_data(a: dict[str, object]) -> None:
    patch = merge([parse(a, "a.yml")])
    result = materialize(patch)
    if not isinstance(result, MapNode):
        return
    text = render_show(result, origins=True, show_secrets=True)
    again = parse_yaml(text, "shown.yml", LayerKind.BASE)
    assert (again.plain() if again is not None else {}) == result.plain()


YAML_ALPHABET = string.ascii_letters + string.digits + " \n\t:-[]{}!&*#'\",.|>?%@`\\~^"


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.text(alphabet=YAML_ALPHABET, max_size=200))
def test_random_yaml_never_raises_anything_but_a_located_error(tmp_path_factory, text: str) -> None:
    try:
        parse_yaml(text, "fdl.yml", LayerKind.BASE)
    except ManifestError as error:
        assert error.location is not None or error.message.startswith("fdl.yml")


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_mutated_manifests_give_clear_errors(tmp_path: Path, data: st.DataObject) -> None:
    from fdl.manifest import load_manifest

    source = (
        Path(__file__).parent.parent / "fixtures" / "manifest-project" / "fdl.yml"
    ).read_text()
    position = data.draw(st.integers(0, len(source)))
    insert = data.draw(st.text(alphabet=YAML_ALPHABET, max_size=8))
    cut = data.draw(st.integers(0, 5))
    mutated = source[:position] + insert + source[position + cut :]
    project = tmp_path / "p"
    project.mkdir(exist_ok=True)
    (project / "fdl.yml").write_text(mutated.replace("inherit-from: defaults/common.yml", ""))
    try:
        load_manifest(project, environ={})
    except FdlError as error:
        assert str(error)
        if isinstance(error, ManifestError) and not hasattr(error, "errors"):
            assert error.location is not None or "fdl.yml" in str(error)


WORD_ALPHABET = "Aaz09_./+~=@%-:#&!*|>'\" ,[]{}?`<xe"


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=WORD_ALPHABET, min_size=1, max_size=12),
        st.from_regex(
            r"[-+]?(0x[0-9a-f]+|0o[0-7]+|[0-9]*\.?[0-9]*(e[-+]?[0-9]+)?)", fullmatch=True
        ),
        st.sampled_from(
            ["~", "null", "True", "FALSE", ".inf", ".nan", "12.10", "..", "...", "---"]
        ),
    )
)
def test_a_plain_word_from_the_environment_is_what_the_parser_reads(text: str) -> None:
    """FDL__ and --set values of one plain word skip PyYAML: same value, type and text."""
    from fdl.manifest._nodes import Origin
    from fdl.manifest._overrides import _PLAIN_WORD, _value_node

    origin = Origin("$FDL__X", layer=LayerKind.ENV)
    try:
        node = parse_yaml(text, "$FDL__X", LayerKind.ENV)
    except ManifestError:
        assert not _PLAIN_WORD.match(text)
        return
    if not _PLAIN_WORD.match(text):
        return  # parsed by PyYAML on both sides
    fast = _value_node(text, origin, "$FDL__X")
    assert isinstance(node, ScalarNode) and isinstance(fast, ScalarNode)
    same = (fast.value != fast.value and node.value != node.value) or fast.value == node.value
    assert same and type(fast.value) is type(node.value), (text, fast.value, node.value)
    assert (fast.raw, fast.tag, fast.origin) == (node.raw, node.tag, origin)


# The characters libyaml accepts in a stream (YAML 1.1's printable set), as the reader
# wrote them before it searched for the refused ones instead.
ALLOWED = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


@settings(max_examples=3000, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(
            st.characters(max_codepoint=0xA0),
            st.characters(min_codepoint=0xD700, max_codepoint=0x10100, exclude_categories=()),
            st.characters(),
        ),
        max_size=12,
    )
)
def test_the_refused_characters_are_the_complement_of_yaml_printable(text: str) -> None:
    import re

    from fdl.manifest._layers import _not_printable

    found, expected = _not_printable(text), re.search(ALLOWED, text)
    assert (found and found.start()) == (expected and expected.start())
