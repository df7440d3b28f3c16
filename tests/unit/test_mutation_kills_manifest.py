"""Manifest merge behaviours the mutation run (scripts/mutation.py) found untested: where each
merged value and key was written (what `config explain` and the errors point at), deletions,
and composing overlays in any grouping (layers are patches: merging is associative)."""

from __future__ import annotations

import pytest

from fdl.manifest._explain import Contribution, Explanation, explain_path, explain_paths
from fdl.manifest._layers import Layer
from fdl.manifest._merge import DeletedNode, compose, deletions, materialize, merge
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, node_at
from fdl.manifest._yaml import parse_yaml
from fdl.manifest.render import explain_data


def layer(text: str, name: str) -> Node:
    node = parse_yaml(text, name, LayerKind.OVERLAY)
    assert node is not None
    return node


BASE = "a:\n  x: 1\n  y: [1]\nb: 2\nc: {k: 1}\nd: 5\n"
OVER = "a:\n  y: !append [2]\n  z: 3\nb: null\nc: !replace {m: 2}\nd: !append [1]\n"


def test_each_merged_value_points_where_it_was_written() -> None:
    tree = materialize(merge([layer(BASE, "base.yml"), layer(OVER, "over.yml")]))
    assert tree is not None
    assert tree.plain() == {"a": {"x": 1, "y": [1, 2], "z": 3}, "c": {"m": 2}, "d": [1]}
    where = {
        path: str(node.origin)
        for path in [("a",), ("a", "x"), ("a", "y"), ("a", "z"), ("c",), ("c", "m"), ("d",)]
        if (node := node_at(tree, path)) is not None
    }
    assert where == {
        ("a",): "base.yml:2:3",  # the mapping is the one base.yml opened
        ("a", "x"): "base.yml:2:6",
        ("a", "y"): "over.yml:2:6",  # the list as the !append left it
        ("a", "z"): "over.yml:3:6",
        ("c",): "over.yml:5:4",  # !replace: the mapping is over.yml's
        ("c", "m"): "over.yml:5:17",
        ("d",): "over.yml:6:4",  # an !append over a scalar: the list is over.yml's
    }


def test_each_merged_key_points_where_the_key_was_written() -> None:
    tree = materialize(merge([layer(BASE, "base.yml"), layer(OVER, "over.yml")]))
    a = node_at(tree, ("a",)) if tree is not None else None
    assert isinstance(a, MapNode)
    # a key's column is not its value's: an error about the key points at the key
    assert {key: str(a.key_origin(key)) for key in a.entries} == {
        "x": "base.yml:2:3",
        "y": "over.yml:2:3",
        "z": "over.yml:3:3",
    }
    c = node_at(tree, ("c",)) if tree is not None else None
    assert isinstance(c, MapNode)
    assert str(c.key_origin("m")) == "over.yml:5:14"  # in a !replace mapping too


def test_the_final_tree_holds_no_merge_tags() -> None:
    tree = materialize(merge([layer(BASE, "base.yml"), layer(OVER, "over.yml")]))
    stack = [tree]
    while stack:
        node = stack.pop()
        assert node is not None and node.tag is None, node
        if isinstance(node, MapNode):
            stack.extend(node.entries.values())


def test_deletions_name_each_deleted_path_and_the_null_that_deleted_it() -> None:
    patch = merge(
        [layer("a: {x: 1, y: 2}\nb: 1\n", "base.yml"), layer("a: {x: ~}\nb: null\n", "over.yml")]
    )
    assert [(path, str(origin)) for path, origin in deletions(patch)] == [
        (("a", "x"), "over.yml:1:8"),
        (("b",), "over.yml:2:4"),
    ]
    assert deletions(None) == []


def test_nothing_merged_is_nothing_and_a_missing_layer_is_skipped() -> None:
    assert merge([]) is None
    assert merge([None]) is None
    base, over = layer("a: 1\n", "base.yml"), layer("b: 2\n", "over.yml")
    tree = materialize(merge([None, base, None, over]))
    assert tree is not None and tree.plain() == {"a": 1, "b": 2}


def test_append_on_a_scalar_sets_it() -> None:
    tree = materialize(merge([layer("a: 1\n", "base.yml"), layer("a: !append five\n", "over.yml")]))
    assert tree is not None and tree.plain() == {"a": "five"}


def test_a_deleted_root_materializes_to_nothing() -> None:
    assert materialize(None) is None
    assert materialize(DeletedNode(Origin("over.yml", 1, 1))) is None


# (base, first overlay, second overlay, what the three give)
TRIPLES = [
    ("a: {x: 1}\n", "a: !replace {z: 3}\n", "a: {w: 4}\n", {"a": {"z": 3, "w": 4}}),
    ("a: {x: 1}\n", "a: null\n", "a: {y: 2}\n", {"a": {"y": 2}}),
    ("a: [1, 2]\n", "a: !append [3]\n", "a: !append [4]\n", {"a": [1, 2, 3, 4]}),
    ("a: [1, 2]\n", "b: 1\n", "a: !append [4]\n", {"a": [1, 2, 4], "b": 1}),
    ("a: {x: 1}\n", "b: 1\n", "a: {y: 2}\n", {"a": {"x": 1, "y": 2}, "b": 1}),
    ("a: 5\n", "a: {k: 1}\n", "a: {k: null, m: 2}\n", {"a": {"m": 2}}),
    ("a: 5\n", "b: 1\n", "a: {l: !append [1], k: 2}\n", {"a": {"l": [1], "k": 2}, "b": 1}),
    ("a: {l: [0]}\n", "a: 5\n", "a: {l: !append [1]}\n", {"a": {"l": [1]}}),
]


@pytest.mark.parametrize(("base", "first", "second", "expected"), TRIPLES)
def test_two_overlays_composed_first_give_what_the_three_layers_give(
    base: str, first: str, second: str, expected: dict[str, object]
) -> None:
    layers = [layer(base, "base.yml"), layer(first, "one.yml"), layer(second, "two.yml")]
    in_order = materialize(merge(layers))
    grouped = materialize(compose(layers[0], compose(layers[1], layers[2])))
    assert in_order is not None and grouped is not None
    assert in_order.plain() == expected
    assert grouped.plain() == expected
    origins = {path: str(node.origin) for path, node in _leaves(in_order)}
    assert {path: str(node.origin) for path, node in _leaves(grouped)} == origins
    assert all(not origin.startswith("None") for origin in origins.values())


def _leaves(node: Node, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Node]]:
    out = [(path, node)]
    if isinstance(node, MapNode):
        for key, child in node.entries.items():
            out += _leaves(child, (*path, key))
    return out


def _stories(texts: list[str], path: tuple[str, ...]) -> list[Explanation]:
    """``path`` explained one path at a time and with the walk shared between paths."""
    roots = [layer(text, f"l{i}.yml") for i, text in enumerate(texts)]
    layers = [Layer(LayerKind.OVERLAY, f"l{i}.yml", None, root) for i, root in enumerate(roots)]
    final = materialize(merge(roots))
    return [explain_path(layers, final, path), explain_paths(layers, final, [path])[0]]


def _told(story: Explanation) -> tuple[object, ...]:
    def said(contributions: list[Contribution]) -> list[str]:
        return [f"{c.action} {c.origin.source}" for c in contributions]

    removed = story.removed_by
    return (
        story.present,
        story.value,
        said(story.live),
        said(story.overridden),
        None if removed is None else f"{removed.action} {removed.origin.source}",
    )


@pytest.mark.parametrize(
    ("texts", "told"),
    [
        # an empty value where nothing was below: the null is the value, nothing deleted
        (["a:\n  b:\n"], (True, None, ["delete l0.yml"], [], None)),
        # an !append keeps the list below it live, newest first
        (
            ["a: {b: [1]}", "a: {b: !append [2]}"],
            (True, [1, 2], ["append l1.yml", "set l0.yml"], [], None),
        ),
        # a list set over a list overrides it
        (["a: {b: [1]}", "a: {b: [2]}"], (True, [2], ["set l1.yml"], ["set l0.yml"], None)),
        # a null over a value deletes it: the null is what removed it
        (["a: {b: 1}", "a: {b: null}"], (False, None, [], ["set l0.yml"], "delete l1.yml")),
    ],
)
def test_explain_tells_what_each_layer_did(texts: list[str], told: tuple[object, ...]) -> None:
    for story in _stories(texts, ("a", "b")):
        assert _told(story) == told


def test_a_value_tagged_secret_is_masked_in_explain() -> None:
    story = _stories(["a:\n  b: !secret hunter2\n", "a: {c: 1}"], ("a", "b"))
    for data in (explain_data([story[0]]), explain_data([story[1]])):
        assert data[0]["secret"] is True
        assert data[0]["value"] == "***"
