"""The fast paths of ``config show``/``config explain`` give what the straightforward ones give.

``explain_paths`` walks each layer once per parent mapping instead of once per leaf; here it
is compared, explanation by explanation and as rendered text and JSON, with
``explain_path`` (one walk per leaf and layer, the reference) on generated manifests of
many layers that use every merge rule (``null``, ``!append``, ``!replace``, a mapping
replaced by a scalar and back, secrets). ``render_show`` (which remembers what it learnt
about secrets) is compared with the straightforward rendering it replaced, and
``resolve_plain``/``is_huge_int`` (which skip their patterns for text that cannot match)
with the patterns alone. Cost: about 8 s.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdl.manifest._explain import Contribution, Explanation, explain_path, explain_paths
from fdl.manifest._layers import Layer
from fdl.manifest._merge import materialize, merge
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode
from fdl.manifest._secrets import TOKEN_SHAPES
from fdl.manifest._yaml import parse_yaml
from fdl.manifest.render import explain_data, render_explain

KEYS = ("a", "b", "c", "api_token", "run", "deep")
# variables and --set have no layer suffix in explain's text: every kind is drawn
KINDS = [LayerKind.INHERITED, LayerKind.BASE, LayerKind.OVERLAY, LayerKind.ENV, LayerKind.SET]
TOKEN = "ghp_" + "a" * 36
SCALARS = (
    "1",
    "x",
    "null",
    "~",
    "''",
    "12.10",
    "yes",
    TOKEN,
    "!secret hunter2",
    "[1, 2]",
    "[{a: 1, b: x}, y]",
    f"[{{a: 1, b: {TOKEN}}}, [z]]",
    "[{}, [], {c: !secret s}]",
)


def _value(rng: random.Random, depth: int, indent: int) -> str:
    """A YAML value (block style) at ``indent``: a scalar, a list or a mapping."""
    roll = rng.random()
    if depth >= 4 or roll < 0.45:
        return " " + rng.choice(SCALARS)
    if roll < 0.55:
        return " !append [" + rng.choice(("1", "x", "2")) + "]"
    tag = " !replace" if roll < 0.63 else ""
    keys = rng.sample(KEYS, rng.randint(1, 3))
    pad = " " * (indent + 2)
    lines = [f"{pad}{k}:{_value(rng, depth + 1, indent + 2)}" for k in keys]
    return tag + "\n" + "\n".join(lines)


def _layers(seed: int, count: int) -> list[Layer]:
    rng = random.Random(seed)
    out = []
    for index in range(count):
        groups = rng.sample([f"g{i}" for i in range(12)], rng.randint(1, 8))
        text = "".join(f"{g}:{_value(rng, 1, 0)}\n" for g in groups)
        source = f"l{index}.yml"
        kind = rng.choice(KINDS)
        out.append(Layer(kind, source, None, parse_yaml(text, source, kind)))
    return out


def _explained(
    layers: list[Layer], final: Node | None, paths: list[tuple[str, ...]]
) -> tuple[list[Explanation], list[Explanation]]:
    reference = [explain_path(layers, final, path) for path in paths]
    return reference, explain_paths(layers, final, paths)


def _contribution(c: Contribution | None) -> object:
    if c is None:
        return None
    return (c.action, c.value, str(c.origin), c.origin.layer, c.at, id(c.node))


def _story(e: Explanation) -> object:
    return (
        e.path,
        e.value,
        e.present,
        [_contribution(c) for c in e.live],
        [_contribution(c) for c in e.overridden],
        _contribution(e.removed_by),
    )


def _all_paths(layers: list[Layer]) -> list[tuple[str, ...]]:
    """Every path any layer writes, and every ancestor of one (not only the leaves)."""
    paths: dict[tuple[str, ...], None] = {}

    def visit(node: Node | None, path: tuple[str, ...]) -> None:
        paths[path] = None
        if isinstance(node, MapNode):
            for key, child in node.entries.items():
                visit(child, (*path, key))

    for layer in layers:
        visit(layer.root, ())
    return [(*p, "absent") for p in paths] + list(paths)


@pytest.mark.parametrize("seed", range(60))
def test_explain_paths_tells_the_story_explain_path_tells(seed: int) -> None:
    layers = _layers(seed, count=2 + seed % 19)
    final = materialize(merge(layer.root for layer in layers))
    from fdl.manifest._explain import explainable_paths

    for paths in (explainable_paths(layers, final), _all_paths(layers)):
        reference, fast = _explained(layers, final, paths)
        assert [_story(e) for e in fast] == [_story(e) for e in reference]
        for secrets in (False, True):
            assert render_explain(fast, show_secrets=secrets) == render_explain(
                reference, show_secrets=secrets
            )
            assert explain_data(fast, show_secrets=secrets) == explain_data(
                reference, show_secrets=secrets
            )


def test_generated_manifests_use_every_rule() -> None:
    """The generator reaches every action, or the comparison above proves little."""
    actions: set[str] = set()
    for seed in range(60):
        layers = _layers(seed, count=2 + seed % 19)
        final = materialize(merge(layer.root for layer in layers))
        for item in explain_paths(layers, final, _all_paths(layers)):
            contributions = [*item.live, *item.overridden]
            if item.removed_by is not None:
                contributions.append(item.removed_by)
            actions.update(c.action for c in contributions)
    assert actions == {"set", "append", "delete", "replace-ancestor", "removed-by-replace"}


# --- config show: the rendering before it remembered what it learnt --------------------


def _reference_rows(
    node: MapNode, indent: int, rows: list[tuple[str, str]], show_secrets: bool, secret: bool
) -> None:
    from fdl.manifest import render
    from fdl.manifest._secrets import is_secret_key, looks_secret

    pad = " " * indent
    for key, child in node.entries.items():
        hidden = not show_secrets and (
            secret or is_secret_key(key) or child.tag == "!secret" or looks_secret(child.plain())
        )
        label = render._origin_label(child.origin)
        inline = render._inline(child, hidden)
        if inline is not None and len(pad) + len(key) + len(inline) + 2 <= render.INLINE_WIDTH:
            rows.append((f"{pad}{render._key_text(key)}: {inline}", label))
        elif isinstance(child, MapNode):
            rows.append((f"{pad}{render._key_text(key)}:", ""))
            _reference_rows(child, indent + 2, rows, show_secrets, hidden)
        elif isinstance(child, SeqNode):
            rows.append((f"{pad}{render._key_text(key)}:", ""))
            _reference_seq_rows(child, indent + 2, rows, show_secrets, hidden)
        else:
            assert isinstance(child, ScalarNode)
            rows.append(
                (f"{pad}{render._key_text(key)}: {render._scalar_text(child, hidden)}", label)
            )


def _reference_seq_rows(
    node: SeqNode, indent: int, rows: list[tuple[str, str]], show_secrets: bool, secret: bool
) -> None:
    from fdl.manifest import render
    from fdl.manifest._secrets import looks_secret

    pad = " " * indent
    for item in node.items:
        hidden = secret or (
            not show_secrets and (item.tag == "!secret" or looks_secret(item.plain()))
        )
        inline = render._inline(item, hidden)
        if inline is not None:
            rows.append((f"{pad}- {inline}", render._origin_label(item.origin)))
        elif isinstance(item, MapNode):
            sub: list[tuple[str, str]] = []
            _reference_rows(item, indent + 2, sub, show_secrets, hidden)
            first, *rest = sub
            rows.append((f"{pad}- {first[0].lstrip()}", first[1]))
            rows.extend(rest)
        else:
            assert isinstance(item, SeqNode)
            rows.append((f"{pad}-", ""))
            _reference_seq_rows(item, indent + 2, rows, show_secrets, hidden)


@pytest.mark.parametrize("seed", range(60))
def test_render_show_prints_what_the_straightforward_rendering_printed(seed: int) -> None:
    from fdl.manifest.render import render_show

    layers = _layers(seed, count=2 + seed % 19)
    final = materialize(merge(layer.root for layer in layers))
    assert isinstance(final, MapNode)
    for secrets in (False, True):
        rows: list[tuple[str, str]] = []
        _reference_rows(final, 0, rows, secrets, False)
        expected = "".join(body + "\n" for body, _ in rows)
        assert render_show(final, origins=False, show_secrets=secrets) == expected
    assert "***" in render_show(final) or TOKEN not in render_show(final, show_secrets=True)


# --- plain scalars: the shortcut and the patterns agree --------------------------------


def _reference_resolve(text: str) -> object:
    from fdl.manifest import _yaml as y

    if y._NULL.match(text):
        return None
    if text in y._BOOL_TRUE:
        return True
    if text in y._BOOL_FALSE:
        return False
    if y._INT10.match(text) or y._INT8.match(text) or y._INT16.match(text):
        if y._int_too_long(text):
            return text
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text)
    if y._FLOAT.match(text):
        return float(text)
    if y._INF.match(text):
        return float("-inf") if text.startswith("-") else float("inf")
    if y._NAN.match(text):
        return float("nan")
    return text


PLAIN_EXAMPLES = [
    "", "\n", "~", "~\n", "null", "Null\n", "nul", "true", "True\n", "false", "FALSE", "tru",
    "1", "-1", "+1\n", "0o17", "0x1F", "0x", "1.5", ".5", "1e3", "-.inf", ".NaN", ".nan\n",
    "12.10", "yes", "x", " 1", "1" * 5000, "0x" + "f" * 4000, "make target", "ghp_x",
    "--flag", "-x", "+", "-", "-.5", "+.inf", "-.nan", "-0x1F", "+0o7", "-1" + "2" * 4400,
]  # fmt: skip


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("text", PLAIN_EXAMPLES)
def test_resolve_plain_examples(text: str) -> None:
    from fdl.manifest._yaml import is_huge_int, resolve_plain

    assert _same(resolve_plain(text), _reference_resolve(text))
    from fdl.manifest import _yaml as y

    matches = bool(y._INT10.match(text) or y._INT8.match(text) or y._INT16.match(text))
    assert is_huge_int(text) == (matches and y._int_too_long(text))


@given(st.text(max_size=12) | st.from_regex(r"[-+.~0-9a-zA-Z\n]{0,8}", fullmatch=True))
@settings(max_examples=400, deadline=None)
def test_resolve_plain_agrees_with_the_patterns(text: str) -> None:
    from fdl.manifest import _yaml as y
    from fdl.manifest._yaml import is_huge_int, resolve_plain

    assert _same(resolve_plain(text), _reference_resolve(text))
    matches = bool(y._INT10.match(text) or y._INT8.match(text) or y._INT16.match(text))
    assert is_huge_int(text) == (matches and y._int_too_long(text))


# --- config explain writes in pieces what it wrote at once ------------------------------


def _project(root: Path, commands: int) -> None:
    """Three layers (inherited, base, overlay) of ``commands`` commands, a secret among them."""
    (root / "common.yml").write_text(
        "commands:\n"
        + "".join(
            f"  c{i}:\n    description: d{i} ünï\n    run: make {i}\n" for i in range(commands)
        )
    )
    (root / "fdl.yml").write_text(
        "inherit-from: common.yml\ncommands:\n"
        + "".join(f"  c{i}:\n    run: make {i} --base\n" for i in range(0, commands, 3))
        + f"  c1:\n    docker: null\n    description: {TOKEN}\n"
    )
    (root / "fdl.ci.yml").write_text("commands:\n  c2:\n    run: null\n  c4: null\n")


@pytest.mark.parametrize(
    "extra", [[], ["--json"], ["--show-secrets"], ["--json", "--show-secrets"]]
)
def test_explain_in_pieces_writes_what_one_piece_wrote(
    run_fdl, tmp_path: Path, extra: list[str]
) -> None:
    from fdl.manifest import _manifest, load_manifest

    _project(tmp_path, commands=700)  # about 1,400 explanations: three pieces
    manifest = load_manifest(tmp_path, env="ci", environ={})
    explanations = manifest.explain()
    assert len(explanations) > 2 * _manifest._EXPLAIN_PIECE
    secrets = "--show-secrets" in extra
    if "--json" in extra:
        expected = (
            json.dumps(
                explain_data(explanations, show_secrets=secrets),
                indent=2,
                ensure_ascii=False,
                default=str,
            )
            + "\n"
        )
    else:
        expected = render_explain(explanations, show_secrets=secrets)
    result = run_fdl(["--env", "ci", "config", "explain", *extra], cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert ("ghp_" in result.stdout) == secrets


def test_explain_json_of_no_explanation_is_an_empty_list() -> None:
    from fdl.manifest.render import JsonList, explain_json

    out = io.StringIO()
    items = JsonList(out.write)
    items(explain_json([]))
    items("")
    items.close()
    assert out.getvalue() == "[]\n" == json.dumps([], indent=2) + "\n"


# --- token shapes: the hints that let most text skip the searches ----------------------


@pytest.mark.parametrize("shape", range(len(TOKEN_SHAPES)))
def test_every_token_shape_holds_a_hint(shape: int) -> None:
    """A shape whose literal texts miss some of its matches would never find those: every
    text it matches must hold one of its texts."""
    from fdl.manifest._secrets import token_kind

    kind, needles, pattern = TOKEN_SHAPES[shape]

    @given(st.from_regex(pattern))
    @settings(max_examples=60, deadline=None)
    def check(text: str) -> None:
        assert any(needle in text for needle in needles), (kind, text)
        assert token_kind(text) is not None

    check()


@given(st.text(max_size=60) | st.from_regex(r"[-_@A-Za-z0-9:/ ]{0,80}", fullmatch=True))
@settings(max_examples=300, deadline=None)
def test_token_kind_with_needles_agrees_with_the_searches(text: str) -> None:
    import re

    from fdl.manifest._secrets import token_kind

    expected = next((k for k, _, p in TOKEN_SHAPES if re.search(p, text)), None)
    assert token_kind(text) == expected


# --- which paths explain lists: the walk beside the final tree and the plain one --------


def _reference_explainable(
    layers: list[Layer], final: Node | None, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    from fdl.manifest._nodes import node_at, walk_leaves

    seen: dict[tuple[str, ...], None] = {}
    base = node_at(final, prefix) if final is not None else None
    if base is not None:
        for path, _ in walk_leaves(base, prefix):
            seen[path] = None
    for layer in layers:
        start = node_at(layer.root, prefix) if layer.root is not None else None
        if start is None:
            continue
        for path, _ in walk_leaves(start, prefix):
            if path in seen:
                continue
            current = node_at(final, path) if final is not None else None
            if isinstance(current, MapNode) and current.entries:
                continue
            seen[path] = None
    paths = list(seen)
    removed = {p for p in paths if (node_at(final, p) if final is not None else None) is None}
    return [
        p for p in paths if not (p in removed and any(p[:i] in removed for i in range(1, len(p))))
    ]


@pytest.mark.parametrize("seed", range(60))
def test_explainable_paths_are_the_plain_walks(seed: int) -> None:
    from fdl.manifest._explain import explainable_paths

    layers = _layers(seed, count=2 + seed % 19)
    final = materialize(merge(layer.root for layer in layers))
    prefixes = {p[:n] for p in _all_paths(layers) for n in range(3)}
    for prefix in sorted(prefixes):
        for tree in (final, None):
            expected = _reference_explainable(layers, tree, prefix)
            assert explainable_paths(layers, tree, prefix) == expected, prefix


# --- config explain's text: the rendering before it was made faster ---------------------


def _reference_render_explain(explanations: list[Explanation], show_secrets: bool) -> str:
    from fdl.manifest import render
    from fdl.manifest._nodes import dotted
    from fdl.manifest._secrets import is_secret_node, is_secret_path, looks_secret

    def is_secret(e: Explanation) -> bool:
        contributions = [*e.live, *e.overridden]
        return (
            is_secret_path(e.path)
            or any(is_secret_node(c.node) for c in contributions)
            or looks_secret(e.value)
            or any(looks_secret(c.value) for c in contributions)
        )

    def text(c: Contribution, secret: bool, with_value: bool) -> str:
        where = str(c.origin)
        if c.origin.layer not in (LayerKind.ENV, LayerKind.SET):
            where += f"  ({c.origin.layer.value})"
        if c.action in ("replace-ancestor", "removed-by-replace"):
            return f"{dotted(c.at)} at {where}"
        if not with_value:
            return where
        return f"{render._value_text(c.value, secret)}  {where}"

    blocks = []
    for item in explanations:
        secret = not show_secrets and is_secret(item)
        lines = []
        if item.present:
            lines.append(f"{dotted(item.path)} = {render._value_text(item.value, secret)}")
            for index, c in enumerate(item.live):
                word = render._ACTION_WORDS[c.action] if index == 0 else "appended onto"
                if c.action == "delete":
                    word = "set empty by"
                lines.append(f"  {word:<14}{text(c, secret, len(item.live) > 1)}")
        else:
            lines.append(f"{dotted(item.path)}  (removed)")
            if item.removed_by is not None:
                word = render._ACTION_WORDS[item.removed_by.action]
                lines.append(f"  {word:<14}{text(item.removed_by, secret, False)}")
        for index, c in enumerate(item.overridden):
            word = ("was" if not item.present else "overrode") if index == 0 else ""
            lines.append(f"  {word:<14}{text(c, secret, True)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + ("\n" if blocks else "")


@pytest.mark.parametrize("seed", range(60))
def test_render_explain_prints_what_the_plain_rendering_printed(seed: int) -> None:
    layers = _layers(seed, count=2 + seed % 19)
    final = materialize(merge(layer.root for layer in layers))
    explanations = explain_paths(layers, final, _all_paths(layers))
    for secrets in (False, True):
        expected = _reference_render_explain(explanations, secrets)
        assert render_explain(explanations, show_secrets=secrets) == expected


# --- config explain's text straight from the layers (write_explain) ---------------------


def _written(
    layers: list[Layer],
    final: Node | None,
    prefix: tuple[str, ...],
    secrets: bool,
    as_json: bool = False,
) -> str | None:
    """What write_explain writes (``as_json``: the JSON list it makes), None if it declined."""
    from fdl.manifest._explain_text import write_explain
    from fdl.manifest.render import JsonList

    pieces: list[str] = []
    write = JsonList(pieces.append) if as_json else pieces.append
    if not write_explain(layers, final, prefix, write, show_secrets=secrets, as_json=as_json):
        assert not pieces
        return None
    if isinstance(write, JsonList):
        write.close()
    return "".join(pieces)


def _rendered(
    layers: list[Layer],
    final: Node | None,
    prefix: tuple[str, ...],
    secrets: bool,
    as_json: bool = False,
) -> str:
    """The long way: explanation objects, rendered (``as_json``: what ``console.json``
    printed of ``explain_data``)."""
    from fdl.manifest._explain import explainable_paths

    explained = explain_paths(layers, final, explainable_paths(layers, final, prefix))
    if as_json:
        data = explain_data(explained, show_secrets=secrets)
        return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    return render_explain(explained, show_secrets=secrets)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("seed", range(60))
def test_write_explain_writes_the_text_of_the_explanations(seed: int, as_json: bool) -> None:
    layers = _layers(seed, count=2 + seed % 19)
    final = materialize(merge(layer.root for layer in layers))
    prefixes = {p[:n] for p in _all_paths(layers) for n in range(3)}
    for prefix in sorted(prefixes):
        for secrets in (False, True):
            text = _written(layers, final, prefix, secrets, as_json)
            if text is not None:
                expected = _rendered(layers, final, prefix, secrets, as_json)
                assert text == expected, (prefix, secrets)


def test_generated_manifests_reach_every_way_of_write_explain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The comparison above proves little unless write_explain wrote stories itself, sent
    others the long way, found removed leaves by its own walk and (after a story told the
    long way whole) by absent_paths, and declined some prefixes."""
    from fdl.manifest import _explain_text

    seen = dict.fromkeys(("written", "long way", "walk found", "absent_paths", "declined"), 0)
    leaf, found, absent = (
        _explain_text._Walk.leaf,
        _explain_text._Walk.absent_in_order,
        _explain_text.absent_paths,
    )

    def counted_leaf(self: _explain_text._Walk, *args: Any) -> bool:
        done: bool = leaf(self, *args)
        seen["written" if done else "long way"] += 1
        return done

    def counted_found(self: _explain_text._Walk) -> list[tuple[str, ...]]:
        paths = found(self)
        seen["walk found"] += bool(paths)
        return paths

    def counted_absent(*args: Any) -> list[tuple[str, ...]]:
        seen["absent_paths"] += 1
        return absent(*args)

    monkeypatch.setattr(_explain_text._Walk, "leaf", counted_leaf)
    monkeypatch.setattr(_explain_text._Walk, "absent_in_order", counted_found)
    monkeypatch.setattr(_explain_text, "absent_paths", counted_absent)
    for seed in range(60):
        layers = _layers(seed, count=2 + seed % 19)
        final = materialize(merge(layer.root for layer in layers))
        for prefix in {p[:n] for p in _all_paths(layers) for n in range(2)}:
            seen["declined"] += _written(layers, final, prefix, False) is None
    assert all(seen.values()), seen


@pytest.mark.parametrize("secrets", [False, True])
def test_generated_manifests_reach_every_way_of_the_json_walk(
    monkeypatch: pytest.MonkeyPatch, secrets: bool
) -> None:
    """The JSON comparison above proves little unless the JSON walk wrote stories of
    every kind of value itself and sent others the long way, secrets shown or not."""
    from fdl.manifest import _explain_text

    seen: dict[str, int] = {"long way": 0}
    leaf = _explain_text._JsonWalk.leaf

    def counted_leaf(self: _explain_text._JsonWalk, name: str, node: Node, *rest: Any) -> bool:
        done: bool = leaf(self, name, node, *rest)
        kind = type(node.plain()).__name__ if done else "long way"
        seen[kind] = seen.get(kind, 0) + 1
        return done

    monkeypatch.setattr(_explain_text._JsonWalk, "leaf", counted_leaf)
    for seed in range(60):
        layers = _layers(seed, count=2 + seed % 19)
        final = materialize(merge(layer.root for layer in layers))
        _written(layers, final, (), secrets, as_json=True)
    assert {"long way", "str", "int", "float"} <= {k for k, n in seen.items() if n}, seen


def _plain_layers() -> list[Layer]:
    """Three file layers, a variable and a --set, written by hand: simple stories (numbers,
    booleans, quoted text, a file of its own for each command), and every other kind."""
    texts = [
        (
            LayerKind.INHERITED,
            "common.yml",
            "description: common\n"
            "commands:\n"
            "  b:\n    run: make b\n    timeout: 10\n    gone: x\n"
            "  a:\n    run: make a\n    tags: [x, y]\n    old: {deep: 1, deeper: {z: 2}}\n"
            "  c:\n    run: '--flag'\n    api_token: hunter2\n"
            "  d:\n    run: make d\n    env: {A: 1}\n",
        ),
        (
            LayerKind.BASE,
            "fdl.yml",
            "description: base\n"
            "commands:\n"
            "  a:\n    run: make a --base\n    tags: !append [z]\n    old: null\n"
            "  b:\n    timeout: 12.50\n    gone: null\n    flag: true\n"
            f"  c:\n    run: {TOKEN}\n"
            "  d:\n    env: !replace {B: 2}\n",
        ),
        (
            LayerKind.OVERLAY,
            "fdl.ci.yml",
            "commands:\n  a:\n    run: 'yes'\n  b:\n    run: make b --ci\n  d:\n    run: !secret s\n",
        ),
        (LayerKind.ENV, "$FDL__COMMANDS__B__TIMEOUT", "commands:\n  b:\n    timeout: 15\n"),
        (LayerKind.SET, "--set commands.a.run=x", "commands:\n  a:\n    run: x\n"),
    ]
    return [
        Layer(kind, source, None, parse_yaml(text, source, kind)) for kind, source, text in texts
    ]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("secrets", [False, True])
@pytest.mark.parametrize(
    "prefix", [(), ("commands",), ("commands", "a"), ("commands", "b"), ("commands", "d")]
)
def test_write_explain_by_hand(
    monkeypatch: pytest.MonkeyPatch, prefix: tuple[str, ...], secrets: bool, as_json: bool
) -> None:
    """Simple stories are written without an explanation object; the others (a null, an
    !append, an !replace, a secret, a removed leaf) go the long way; the text is the
    explanations' either way."""
    from fdl.manifest import _explain_text

    layers = _plain_layers()
    final = materialize(merge(layer.root for layer in layers))
    assert isinstance(final, MapNode)
    # the walk drops the layers' misses with filter(None): an empty mapping must be true
    assert MapNode({}, final.origin) and SeqNode([], final.origin)
    expected = _rendered(layers, final, prefix, secrets, as_json)
    long_way: list[tuple[str, ...]] = []
    explain = _explain_text.explain_paths

    def recorded(
        layers: list[Layer], final: Node | None, paths: list[tuple[str, ...]], *rest: Any
    ) -> Any:
        long_way.extend(paths)
        return explain(layers, final, paths, *rest)

    monkeypatch.setattr(_explain_text, "explain_paths", recorded)
    assert _written(layers, final, prefix, secrets, as_json) == expected
    told = {".".join(p) for p in long_way}
    hard = {"commands.a.tags", "commands.a.old", "commands.b.gone", "commands.d.env.B",
            "commands.d.env.A", "commands.d.run"}  # fmt: skip
    if not secrets or as_json:  # a token-shaped value, a key named like a secret
        hard |= {"commands.c.run", "commands.c.api_token"}  # JSON: "secret": true
    assert told == {k for k in hard if k.startswith(".".join(prefix))}
    if not secrets:
        assert "hunter2" not in expected and "ghp_" not in expected
    shown = '"key": "commands.c.api_token"' if as_json else "commands.c.api_token = "
    assert (shown in expected) == (prefix in ((), ("commands",)))


def test_write_explain_json_of_every_kind_of_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Numbers json writes its own way (NaN, Infinity, exponents), text it escapes or
    leaves as is (quotes, control characters, non-ASCII), booleans, a JSON layer and a
    variable without a line: the JSON walk writes them all itself, as json.dumps does."""
    from fdl.manifest import _explain_text
    from fdl.manifest._json import parse_json

    values = [".nan", ".inf", "-.inf", "1e3", "-0.0", "3.14159265", "1e-7", "0x1F", "007", "true", "false", "-12",
              '"say \\"hi\\"\\tand\\u0001"', "é ☃ 𝄞", "'a\\b'", "''", "1_000"]  # fmt: skip
    base = "x:\n" + "".join(f"  k{i}: {v}\n" for i, v in enumerate(values))
    overlay = '{"x": {"k1": 2.5, "k3": "\\u00e9"}}'
    variable = Origin("$FDL__X__K4", 0, 0, LayerKind.ENV, None)
    env = MapNode({"x": MapNode({"k4": ScalarNode(7, variable)}, variable)}, variable)
    layers = [
        Layer(LayerKind.BASE, "fdl.yml", Path("/p/fdl.yml"), parse_yaml(base, "fdl.yml", LayerKind.BASE)),
        Layer(LayerKind.OVERLAY, "fdl.ci.json", None, parse_json(overlay, "fdl.ci.json", LayerKind.OVERLAY)),
        Layer(LayerKind.ENV, "$FDL__X__K4", None, env),
    ]  # fmt: skip
    final = materialize(merge(layer.root for layer in layers))
    monkeypatch.setattr(_explain_text, "explain_paths", None)  # no story the long way
    for secrets in (False, True):
        written = _written(layers, final, (), secrets, as_json=True)
        assert written is not None and "NaN" in written and '"line": null' in written
        assert written == _rendered(layers, final, (), secrets, as_json=True)
        assert len(json.loads(written)) == len(values)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("secrets", [False, True])
def test_manifest_write_explain_writes_what_explain_renders(
    tmp_path: Path, secrets: bool, as_json: bool
) -> None:
    """Every key (a mapping, a leaf, a removed mapping, every leaf) gives the text (or
    the JSON) of ``explain()``; a key no layer sets is the same error."""
    from fdl.errors import ManifestError
    from fdl.manifest import load_manifest

    _project(tmp_path, commands=40)
    manifest = load_manifest(
        tmp_path,
        env="ci",
        environ={"FDL__COMMANDS__C5__RUN": "make five"},
        sets=["commands.c6.run=make six"],
    )
    for key in (None, "commands", "commands.c1", "commands.c1.run", "commands.c4", "commands.c2"):
        pieces: list[str] = []
        manifest.write_explain(key, pieces.append, show_secrets=secrets, as_json=as_json)
        explained = manifest.explain(key)
        if as_json:
            data = explain_data(explained, show_secrets=secrets)
            expected = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
        else:
            expected = render_explain(explained, show_secrets=secrets)
        assert "".join(pieces) == expected, key
    with pytest.raises(ManifestError) as raised:
        manifest.write_explain("commands.c1.nope", pieces.append)
    with pytest.raises(ManifestError) as expected_error:
        manifest.explain("commands.c1.nope")
    assert str(raised.value) == str(expected_error.value)
