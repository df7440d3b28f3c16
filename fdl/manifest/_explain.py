"""Explain where each merged value came from and what it overrode.

Layers stay separate; an explanation replays, for one key path, what every
layer did to it (set, append, delete, replace an ancestor), lowest layer first,
with the same rules as :mod:`fdl.manifest._merge`.
"""

from __future__ import annotations

from fdl.manifest._nodes import (
    TAG_APPEND,
    TAG_REPLACE,
    MapNode,
    Node,
    Origin,
    ScalarNode,
    SeqNode,
    is_null,
    node_at,
    walk_leaves,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.manifest._layers import Layer

SET = "set"
APPEND = "append"
DELETE = "delete"
REPLACE_ANCESTOR = "replace-ancestor"
REMOVED_BY_REPLACE = "removed-by-replace"


class Contribution:
    """What one layer did to one key path.

    Attributes:
        action: ``set``, ``append``, ``delete``, ``replace-ancestor`` (an
            ancestor key was set to a non-mapping) or ``removed-by-replace``
            (an ancestor mapping tagged ``!replace`` left this key out).
        value: The value written (plain data); for ancestor actions, the
            ancestor's value.
        origin: Where it was written.
        at: The key path the action was written at (an ancestor for the
            ancestor actions).
        node: The node written (used for secret detection).
    """

    __slots__ = ("action", "at", "node", "origin", "value")

    def __init__(
        self,
        action: str,
        value: object,
        origin: Origin,
        at: tuple[str, ...],
        node: Node | None = None,
    ) -> None:
        self.action = action
        self.value = value
        self.origin = origin
        self.at = at
        self.node = node


class Explanation:
    """The story of one key path.

    Attributes:
        path: The key path.
        value: The final value (plain data), None when the key is gone.
        present: Whether the key exists in the merged manifest.
        live: Contributions making up the final value (several for ``!append``),
            newest first.
        overridden: Contributions that no longer count, newest first.
        removed_by: The contribution that deleted the key, when it is gone.
    """

    __slots__ = ("live", "overridden", "path", "present", "removed_by", "value")

    def __init__(
        self,
        path: tuple[str, ...],
        value: object,
        present: bool,
        live: list[Contribution],
        overridden: list[Contribution],
        removed_by: Contribution | None = None,
    ) -> None:
        self.path = path
        self.value = value
        self.present = present
        self.live = live
        self.overridden = overridden
        self.removed_by = removed_by

    @property
    def winner(self) -> Contribution | None:
        """The newest contribution to the final value."""
        return self.live[0] if self.live else None


def layer_effect(root: Node | None, path: tuple[str, ...]) -> Contribution | None:
    """What the layer rooted at ``root`` does to ``path`` (None: nothing)."""
    node = root
    under_replace = False
    for depth, key in enumerate(path):
        if not isinstance(node, MapNode):
            return None
        if node.tag == TAG_REPLACE and depth > 0:
            under_replace = True
        child = node.entries.get(key)
        if child is None:
            if node.tag == TAG_REPLACE and depth > 0:
                at = path[:depth]
                return Contribution(REMOVED_BY_REPLACE, node.plain(), node.origin, at, node)
            return None
        at = path[: depth + 1]
        if depth == len(path) - 1:
            if is_null(child) and not under_replace:
                return Contribution(DELETE, None, child.origin, at, child)
            if isinstance(child, SeqNode) and child.tag == TAG_APPEND and not under_replace:
                return Contribution(APPEND, child.plain(), child.origin, at, child)
            return Contribution(SET, child.plain(), child.origin, at, child)
        if not isinstance(child, MapNode):
            if is_null(child) and not under_replace:
                return Contribution(DELETE, None, child.origin, at, child)
            return Contribution(REPLACE_ANCESTOR, child.plain(), child.origin, at, child)
        node = child
    return None


def explain_path(layers: list[Layer], final: Node | None, path: tuple[str, ...]) -> Explanation:
    """Replay every layer's effect on ``path``, lowest layer first.

    The leaf goes through the states of :func:`fdl.manifest._merge.compose`:
    absent, null (an empty value), live, deleted.
    """
    effects = [layer_effect(layer.root, path) for layer in layers]
    node = node_at(final, path) if final is not None else None
    return _replay(path, effects, node)


def explain_paths(
    layers: list[Layer],
    final: Node | None,
    paths: list[tuple[str, ...]],
    walked: dict[tuple[str, ...], list[_Parent | Contribution]] | None = None,
) -> list[Explanation]:
    """``[explain_path(layers, final, p) for p in paths]``, walking each layer once per parent.

    Every leaf below one mapping shares the walk from the root to that mapping (what each
    layer holds there, or the ancestor that replaced it), so the walk is made once per
    parent and layer instead of once per leaf and layer: with many layers and many
    leaves this was most of ``config explain``'s time. ``walked`` keeps those walks
    between calls on the same layers (a new dict at first).
    """
    # parent -> (what each layer that reaches it holds there, lowest first; the final
    # node there; when every one is a plain mapping, the mappings holding each key)
    parents: dict[
        tuple[str, ...],
        tuple[list[_Parent | Contribution], Node | None, dict[str, list[_Parent]] | None],
    ] = {}
    if walked is None:
        walked = {}
    out = []
    for path in paths:
        if not path:
            out.append(explain_path(layers, final, path))
            continue
        parent = path[:-1]
        known = parents.get(parent)
        if known is None:
            above = node_at(final, parent) if final is not None else None
            states = _states(layers, parent, walked)
            known = parents[parent] = (states, above, _holding(states))
        states, above, holding = known
        key = path[-1]
        effects: list[Contribution | None]
        if holding is not None:
            # Most layers hold other keys there: only those holding this one are asked.
            effects = [state.effect(path, key) for state in holding.get(key, ())]
        else:
            effects = []
            for state in states:
                if isinstance(state, _Parent):
                    if key in state.mapping.entries or state.replace_here:
                        effects.append(state.effect(path, key))
                else:
                    effects.append(state)
        node = above.entries.get(key) if isinstance(above, MapNode) else None
        out.append(_replay(path, effects, node))
    return out


def _holding(states: list[_Parent | Contribution]) -> dict[str, list[_Parent]] | None:
    """Key -> the mappings among ``states`` that hold it (lowest first), when every state
    is a mapping that affects only its own keys (no ancestor's contribution, no
    ``!replace`` that removes the keys it lacks); None otherwise."""
    holding: dict[str, list[_Parent]] = {}
    for state in states:
        if not isinstance(state, _Parent) or state.replace_here:
            return None
        for key in state.mapping.entries:
            found = holding.get(key)
            if found is None:
                holding[key] = [state]
            else:
                found.append(state)
    return holding


class _Parent:
    """What one layer holds at a leaf's parent: the mapping, and whether a ``!replace``
    mapping on the way (below the root) makes null a value rather than a deletion."""

    __slots__ = ("at", "mapping", "removed", "replace_here", "under_replace")

    def __init__(self, mapping: MapNode, at: tuple[str, ...], under_replace: bool) -> None:
        self.mapping = mapping
        self.at = at
        self.replace_here = mapping.tag == TAG_REPLACE and len(at) > 0
        self.under_replace = under_replace or self.replace_here
        self.removed: Contribution | None = None

    def removed_by_replace(self) -> Contribution:
        """What this ``!replace`` mapping does to a key it leaves out (made once)."""
        if self.removed is None:
            mapping = self.mapping
            self.removed = Contribution(
                REMOVED_BY_REPLACE, mapping.plain(), mapping.origin, self.at, mapping
            )
        return self.removed

    def step(self, path: tuple[str, ...]) -> _Parent | Contribution | None:
        """What the layer holds at ``path`` (this mapping's key ``path[-1]``) on the way
        to a leaf below it: the mapping there, an ancestor's contribution, or None."""
        child = self.mapping.entries.get(path[-1])
        if child is None:
            return self.removed_by_replace() if self.replace_here else None
        if not isinstance(child, MapNode):
            if is_null(child) and not self.under_replace:
                return Contribution(DELETE, None, child.origin, path, child)
            return Contribution(REPLACE_ANCESTOR, child.plain(), child.origin, path, child)
        return _Parent(child, path, self.under_replace)

    def effect(self, path: tuple[str, ...], key: str) -> Contribution | None:
        """:func:`layer_effect` for the leaf ``path`` (``key`` below this mapping)."""
        child = self.mapping.entries.get(key)
        if child is None:
            return self.removed_by_replace() if self.replace_here else None
        if type(child) is ScalarNode:  # the most common leaf, asked first
            if child.value is None and not self.under_replace:
                return Contribution(DELETE, None, child.origin, path, child)
            return Contribution(SET, child.value, child.origin, path, child)
        if isinstance(child, SeqNode) and child.tag == TAG_APPEND and not self.under_replace:
            return Contribution(APPEND, child.plain(), child.origin, path, child)
        return Contribution(SET, child.plain(), child.origin, path, child)


def _states(
    layers: list[Layer],
    parent: tuple[str, ...],
    walked: dict[tuple[str, ...], list[_Parent | Contribution]],
) -> list[_Parent | Contribution]:
    """The steps of :func:`layer_effect` above the leaf, for every leaf below ``parent``:
    per layer that reaches it (lowest first), the mapping there or the contribution of an
    ancestor (the same for every leaf). One step from the states of ``parent``'s own
    parent, remembered in ``walked``."""
    known = walked.get(parent)
    if known is None:
        if not parent:
            known = [
                _Parent(layer.root, (), False)
                for layer in layers
                if isinstance(layer.root, MapNode)
            ]
        else:
            known = []
            for state in _states(layers, parent[:-1], walked):
                step = state.step(parent) if isinstance(state, _Parent) else state
                if step is not None:
                    known.append(step)
        walked[parent] = known
    return known


def _replay(
    path: tuple[str, ...], effects: list[Contribution | None], node: Node | None
) -> Explanation:
    """The explanation of ``path`` from each layer's effect (lowest first) and its final node."""
    live: list[Contribution] = []
    overridden: list[Contribution] = []
    removed_by: Contribution | None = None
    state = "absent"
    for effect in effects:
        if effect is None:
            continue
        action = effect.action
        if action == APPEND and state == "live" and isinstance(live[-1].value, list):
            live.append(effect)
        elif action == DELETE:
            if state in ("absent", "null"):
                overridden.extend(live)
                live, state = [effect], "null"
            elif state == "deleted":
                overridden.append(effect)
            else:
                overridden.extend(live)
                live, state, removed_by = [], "deleted", effect
        elif action in (REPLACE_ANCESTOR, REMOVED_BY_REPLACE):
            overridden.extend(live)
            live, state, removed_by = [], "deleted", effect
        else:
            overridden.extend(live)
            live = [effect]
            state = "null" if effect.value is None else "live"
            removed_by = None
    return Explanation(
        path=path,
        value=node.plain() if node is not None else None,
        present=node is not None,
        live=list(reversed(live)),
        overridden=list(reversed(overridden)),
        removed_by=removed_by if node is None else None,
    )


def explainable_paths(
    layers: list[Layer], final: Node | None, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every leaf path written by any layer (under ``prefix``), final order first.

    Paths whose final value is a non-empty mapping are left out: their leaves
    are explained instead.
    """
    base = node_at(final, prefix) if final is not None else None
    paths = [path for path, _ in walk_leaves(base, prefix)] if base is not None else []
    return paths + absent_paths(layers, final, prefix)


def absent_paths(
    layers: list[Layer], final: Node | None, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """The leaf paths (under ``prefix``) some layer writes and the final tree lacks, by
    the lowest layer writing each, then in that layer's order (a removed path's removed
    descendants left out): the end of :func:`explainable_paths`."""
    base = node_at(final, prefix) if final is not None else None
    # A layer's leaf that the final tree holds is one of its leaves or inside a mapping
    # there (its leaves are explained): only the absent ones are new.
    absent: dict[tuple[str, ...], None] = {}
    for layer in layers:
        start = node_at(layer.root, prefix) if layer.root is not None else None
        if start is not None:
            _absent_leaves(start, base, prefix, absent)
    return drop_covered(list(absent))


def _absent_leaves(
    node: Node, final: Node | None, path: tuple[str, ...], absent: dict[tuple[str, ...], None]
) -> None:
    """Add the leaf paths below ``node`` (at ``path``) that ``final`` (the final node at
    ``path``) lacks to ``absent``, in :func:`walk_leaves` order; the layer is walked
    beside the final tree, so a leaf the final tree holds costs no key path."""
    stack: list[tuple[tuple[str, ...], Node, Node | None]] = [(path, node, final)]
    while stack:
        at, current, there = stack.pop()
        if not (isinstance(current, MapNode) and current.entries):
            if there is None and at not in absent:
                absent[at] = None
            continue
        held = there.entries if isinstance(there, MapNode) else None
        entries = current.entries
        for key in reversed(list(entries)):
            child = entries[key]
            below = held.get(key) if held is not None else None
            if below is not None:
                if not (isinstance(child, MapNode) and child.entries):
                    continue  # a leaf the final tree holds
                if _all_held(child.entries, below):
                    continue  # a mapping of such leaves (the common case), not walked
            stack.append(((*at, key), child, below))


def _all_held(entries: dict[str, Node], final: Node) -> bool:
    """Whether ``final`` is a mapping holding every key of ``entries`` and no entry is a
    non-empty mapping: none of their leaves is absent from the final tree."""
    if not (isinstance(final, MapNode) and final.entries.keys() >= entries.keys()):
        return False
    return all(type(child) is not MapNode or not child.entries for child in entries.values())


def drop_covered(removed: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Drop removed paths whose removed ancestor is listed too (one story, told once)."""
    listed = set(removed)
    return [path for path in removed if not any(path[:i] in listed for i in range(1, len(path)))]
