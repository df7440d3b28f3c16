"""YAML and JSON parsing into origin-tracking nodes."""

from __future__ import annotations

import math

import pytest

from fdl.errors import ManifestError
from fdl.manifest._json import parse_json
from fdl.manifest._nodes import LayerKind, MapNode, ScalarNode, SeqNode
from fdl.manifest._yaml import parse_yaml


def yaml_tree(text: str) -> MapNode:
    node = parse_yaml(text, "fdl.yml", LayerKind.BASE)
    assert isinstance(node, MapNode)
    return node


def test_origins_are_one_based_line_and_column() -> None:
    tree = yaml_tree("a: 1\nb:\n  c: hello\n  d: [x, y]\n")
    b = tree.entries["b"]
    assert isinstance(b, MapNode)
    c = b.entries["c"]
    assert (c.origin.line, c.origin.column) == (3, 6)
    assert (b.key_origin("c").line, b.key_origin("c").column) == (3, 3)
    d = b.entries["d"]
    assert isinstance(d, SeqNode)
    assert [(i.origin.line, i.origin.column) for i in d.items] == [(4, 7), (4, 10)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("true", True),
        ("False", False),
        ("~", None),
        ("", None),
        ("12", 12),
        ("0x1f", 31),
        ("0o17", 15),
        ("12.8", 12.8),
        ("1e3", 1000.0),
        ("2024-01-01", "2024-01-01"),
        ("'12.8'", "12.8"),
        ('"true"', "true"),
        ("!!str 12", "12"),
        ("!!int 12", 12),
    ],
)
def test_yaml_12_core_schema(text: str, expected: object) -> None:
    value = yaml_tree(f"k: {text}\n").entries["k"]
    assert isinstance(value, ScalarNode)
    assert value.value == expected
    assert type(value.value) is type(expected)


def test_special_floats() -> None:
    tree = yaml_tree("a: .inf\nb: -.Inf\nc: .nan\n")
    assert tree.entries["a"].plain() == math.inf
    assert tree.entries["b"].plain() == -math.inf
    assert math.isnan(tree.entries["c"].plain())  # type: ignore[arg-type]


def test_raw_text_is_kept_for_versions() -> None:
    node = yaml_tree("cuda: 12.10\n").entries["cuda"]
    assert isinstance(node, ScalarNode)
    assert node.value == 12.1
    assert node.raw == "12.10"


def test_tags_are_kept() -> None:
    tree = yaml_tree("a: !append [1]\nb: !replace {x: 1}\nc: !secret hunter2\n")
    assert tree.entries["a"].tag == "!append"
    assert tree.entries["b"].tag == "!replace"
    assert tree.entries["c"].tag == "!secret"
    assert tree.entries["c"].plain() == "hunter2"


def test_unknown_tag_is_a_located_error() -> None:
    with pytest.raises(ManifestError) as info:
        yaml_tree("a: 1\nb: !Ref x\n")
    assert info.value.location is not None
    assert (info.value.location.line, info.value.location.column) == (2, 4)
    assert "unknown tag !Ref" in info.value.message


def test_duplicate_keys_are_errors() -> None:
    with pytest.raises(ManifestError) as info:
        yaml_tree("a: 1\nb: 2\na: 3\n")
    assert "duplicate key 'a'" in info.value.message
    assert "line 1" in info.value.message
    assert info.value.location is not None and info.value.location.line == 3


def test_anchors_aliases_and_merge_keys() -> None:
    tree = yaml_tree(
        "base: &b\n  run: make\n  docker: dev\nother:\n  <<: *b\n  run: make all\nalias: *b\n"
    )
    other = tree.entries["other"]
    assert other.plain() == {"run": "make all", "docker": "dev"}
    assert tree.entries["alias"].plain() == {"run": "make", "docker": "dev"}


def test_alias_to_unknown_anchor() -> None:
    with pytest.raises(ManifestError):
        yaml_tree("a: *nope\n")


def test_second_document_is_rejected() -> None:
    with pytest.raises(ManifestError) as info:
        yaml_tree("a: 1\n---\nb: 2\n")
    assert "second" in info.value.message


def test_syntax_error_shows_line_and_caret() -> None:
    with pytest.raises(ManifestError) as info:
        yaml_tree("a: 1\n b: 2\n")
    error = info.value
    assert error.location is not None and error.location.line == 2
    assert error.details is not None and "^" in error.details and "b: 2" in error.details


def test_hostile_nesting_is_an_error_not_a_crash() -> None:
    depth = 100_000
    with pytest.raises(ManifestError) as info:
        parse_yaml("[" * depth + "]" * depth, "fdl.yml", LayerKind.BASE)
    assert "nesting" in info.value.message


def test_complex_keys_are_rejected() -> None:
    with pytest.raises(ManifestError) as info:
        yaml_tree("? [a, b]\n: 1\n")
    assert "keys" in info.value.message


def test_empty_document_is_none() -> None:
    assert parse_yaml("# only a comment\n", "fdl.yml", LayerKind.BASE) is None
    assert parse_json("  \n", "fdl.json", LayerKind.BASE) is None


def test_json_origins_and_values() -> None:
    node = parse_json(
        '{\n  "a": 1,\n  "b": {"c": [true, null, 2.5, "x"]}\n}\n', "fdl.json", LayerKind.BASE
    )
    assert isinstance(node, MapNode)
    assert node.plain() == {"a": 1, "b": {"c": [True, None, 2.5, "x"]}}
    b = node.entries["b"]
    assert isinstance(b, MapNode)
    c = b.entries["c"]
    assert isinstance(c, SeqNode)
    assert (c.items[2].origin.line, c.items[2].origin.column) == (3, 27)
    assert (node.key_origin("b").line, node.key_origin("b").column) == (3, 3)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('{"a": 1,}', 1, 9),
        ('{"a" 1}', 1, 6),
        ('{\n  "a": tru\n}', 2, 8),
        ('{"a": 1} x', 1, 10),
        ('{"a": 1, "a": 2}', 1, 10),
        ("[1, 2", 1, 6),
    ],
)
def test_json_errors_are_located(text: str, line: int, column: int) -> None:
    with pytest.raises(ManifestError) as info:
        parse_json(text, "fdl.json", LayerKind.BASE)
    location = info.value.location
    assert location is not None
    assert (location.line, location.column) == (line, column)


def test_json_deep_nesting_is_an_error() -> None:
    with pytest.raises(ManifestError):
        parse_json("[" * 10_000 + "]" * 10_000, "fdl.json", LayerKind.BASE)
