"""Merge semantics of manifest layers."""

from __future__ import annotations

from fdl.manifest._merge import compose, materialize, merge
from fdl.manifest._nodes import LayerKind, Node
from fdl.manifest._yaml import parse_yaml


def layer(text: str, name: str = "layer.yml") -> Node | None:
    return parse_yaml(text, name, LayerKind.OVERLAY)


def merged(*texts: str) -> object:
    result = materialize(merge(layer(t, f"l{i}.yml") for i, t in enumerate(texts)))
    return result.plain() if result is not None else None


def test_mappings_merge_key_by_key() -> None:
    assert merged("a: {x: 1, y: 2}", "a: {y: 3, z: 4}") == {"a": {"x": 1, "y": 3, "z": 4}}


def test_keys_keep_base_order_new_keys_after() -> None:
    result = merged("b: 1\na: 2\nc: 3", "a: 9\nd: 4")
    assert isinstance(result, dict)
    assert list(result) == ["b", "a", "c", "d"]


def test_scalars_and_lists_replace() -> None:
    assert merged("a: [1, 2]\nb: x", "a: [3]\nb: y") == {"a": [3], "b": "y"}


def test_null_deletes_what_lower_layers_define() -> None:
    assert merged("a: 1\nb: 2", "a: null") == {"b": 2}
    assert merged("a: {x: 1}", "a: ~") == {}


def test_null_over_nothing_is_an_empty_value() -> None:
    assert merged("commands:\n  sub:\n") == {"commands": {"sub": None}}
    assert merged("a: 1", "b:") == {"a": 1, "b": None}


def test_null_over_null_keeps_the_empty_value() -> None:
    assert merged("a:", "a:") == {"a": None}


def test_deleting_twice_stays_deleted() -> None:
    assert merged("a: 1", "a: null", "a: null") == {}


def test_append_concatenates() -> None:
    assert merged("a: [1, 2]", "a: !append [3]", "a: !append [4]") == {"a": [1, 2, 3, 4]}


def test_append_onto_nothing_or_deleted_is_the_list() -> None:
    assert merged("b: 1", "a: !append [3]") == {"b": 1, "a": [3]}
    assert merged("a: [1]", "a: null", "a: !append [3]") == {"a": [3]}


def test_replace_replaces_a_mapping_wholesale() -> None:
    assert merged("a: {x: 1, y: 2}", "a: !replace {z: 3}") == {"a": {"z": 3}}


def test_mapping_over_deleted_key_does_not_resurrect_old_keys() -> None:
    assert merged("a: {x: 1}", "a: null", "a: {y: 2}") == {"a": {"y": 2}}


def test_empty_overlay_changes_nothing() -> None:
    assert merged("a: 1\nb: [x]", "") == {"a": 1, "b": ["x"]}
    assert merged("a: 1", "# just a comment\n") == {"a": 1}


def test_inputs_are_not_mutated() -> None:
    base = layer("a: {x: 1}")
    over = layer("a: {y: 2}")
    assert base is not None and over is not None
    compose(compose(None, base), over)
    assert base.plain() == {"a": {"x": 1}}
    assert over.plain() == {"a": {"y": 2}}


def test_merged_values_keep_the_winning_origin() -> None:
    result = materialize(merge([layer("a: 1\nb: 2", "base.yml"), layer("b: 3", "over.yml")]))
    assert result is not None
    assert result.plain() == {"a": 1, "b": 3}
    from fdl.manifest._nodes import node_at

    a, b = node_at(result, ("a",)), node_at(result, ("b",))
    assert a is not None and b is not None
    assert a.origin.source == "base.yml" and b.origin.source == "over.yml"


def test_secret_named_keys_are_masked_in_show_and_explain() -> None:
    from fdl.manifest._explain import explain_path
    from fdl.manifest._layers import Layer
    from fdl.manifest._nodes import LayerKind as Kind
    from fdl.manifest.render import explain_data, render_explain, render_show, show_data

    root = layer(
        "registry:\n  user: me\n  api_token: t0k3n\n  db_password: pw\n  ssh_key: k\n  keys: [a]\n"
    )
    tree = materialize(merge([root]))
    assert tree is not None
    text = render_show(tree)  # type: ignore[arg-type]
    assert "t0k3n" not in text and "pw" not in text.split("db_password")[1].split("\n")[0]
    assert "user: me" in text and "keys: [a]" in text
    assert show_data(tree)["registry"]["api_token"] == "***"  # type: ignore[arg-type]
    assert show_data(tree, show_secrets=True)["registry"]["api_token"] == "t0k3n"  # type: ignore[arg-type]
    layers = [Layer(Kind.BASE, "l0.yml", None, root)]
    explained = [explain_path(layers, tree, ("registry", k)) for k in ("api_token", "user")]
    assert "t0k3n" not in render_explain(explained)
    data = explain_data(explained)
    assert data[0]["value"] == "***" and data[0]["secret"] is True
    assert data[1]["value"] == "me" and data[1]["secret"] is False


def test_keys_naming_where_a_secret_is_kept_are_shown() -> None:
    from fdl.manifest.render import show_data

    root = layer(
        "dist:\n  auth:\n    token_env: SCCACHE_TOKEN\n    token: t0k3n\n"
        "db:\n  password_file: /run/secrets/db\n  password: pw\n"
    )
    tree = materialize(merge([root]))
    assert tree is not None
    data = show_data(tree)  # type: ignore[arg-type]
    assert data["dist"]["auth"] == {"token_env": "SCCACHE_TOKEN", "token": "***"}
    assert data["db"] == {"password_file": "/run/secrets/db", "password": "***"}
