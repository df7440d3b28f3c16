"""The fast paths of ``config show``/``config explain`` give what the straightforward ones give.

``explain_paths`` walks each layer once per parent mapping instead of once per leaf; here it
is compared, explanation by explanation and as rendered text and JSON, with
``explain_path`` (one walk per leaf and layer, the reference) on generated manifests of
many layers that use every merge rule (``null``, ``!append``, ``!replace``, a mapping
replaced by a scalar and back, secrets). Cost: about 2 s.
"""

from __future__ import annotations

import random

import pytest

from fdl.manifest._explain import Contribution, Explanation, explain_path, explain_paths
from fdl.manifest._layers import Layer
from fdl.manifest._merge import materialize, merge
from fdl.manifest._nodes import LayerKind, MapNode, Node
from fdl.manifest._yaml import parse_yaml
from fdl.manifest.render import explain_data, render_explain

KEYS = ("a", "b", "c", "api_token", "run", "deep")
SCALARS = ("1", "x", "null", "~", "''", "12.10", "yes", "ghp_" + "a" * 36, "[1, 2]")


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
        kind = rng.choice([LayerKind.INHERITED, LayerKind.BASE, LayerKind.OVERLAY, LayerKind.ENV])
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
