"""The loaded manifest: layers, merged tree, normalised data, explanations."""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from fdl.errors import ManifestError, ManifestErrors
from fdl.manifest._layers import (
    BASE_NAMES,
    Candidate,
    Discovered,
    Layer,
    dedupe,
    discover,
    display_name,
    find_in_directory,
    find_overlay,
    list_environments,
    load_chain,
    overlay_candidates,
)
from fdl.manifest._merge import compose, materialize, merge
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, dotted, node_at
from fdl.manifest._overrides import env_layer, set_layer
from fdl.manifest.schema import Checker, Obj, did_you_mean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # Looks at the merged values (and the project directory) and may add a lowest layer.
    DerivedLayer = Callable[[Node | None, Path], Layer | None]

    from fdl.manifest._explain import Explanation


class _NoCyclicGC:
    """Pause the cyclic garbage collector: node trees hold no cycles, and with
    100k values its repeated full scans made loading grow faster than linearly.
    (A class, not contextlib: importing contextlib costs start-up time.)"""

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            # What was made meanwhile (the manifest) lives as long as the command: filed
            # with the oldest objects without a scan (freeze, then unfreeze into the oldest
            # generation), the young collections that follow do not walk it again and
            # again (1.5 s of `config explain` at 10,000 commands). Cycles among them are
            # still found by the next full collection.
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def split_key(key: str) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``; the empty key is the root."""
    return tuple(part for part in key.split(".") if part) if key else ()


class Manifest:
    """A project manifest with every layer kept apart.

    Attributes:
        path: The base manifest file.
        directory: The directory holding it (the project root).
        env: The selected environment (overlay), if any.
        example: True when the base is an ``.example``/``.dist`` file used read-only.
        layers: The layers in precedence order, lowest first.
        tree: The merged tree (nodes keep their origins).
        data: The merged, validated and normalised manifest as plain data.
        candidates: Every file considered, for ``fdl config layers``.
    """

    def __init__(
        self,
        *,
        path: Path,
        directory: Path,
        env: str | None,
        example: bool,
        layers: list[Layer],
        tree: MapNode,
        patch: Node | None,
        data: dict[str, Any],
        candidates: list[Candidate],
    ) -> None:
        self.path = path
        self.directory = directory
        self.env = env
        self.example = example
        self.layers = layers
        self.tree = tree
        self.patch = patch
        self.data = data
        self.candidates = candidates

    @property
    def source(self) -> str:
        """The base file's display name."""
        return self.path.name

    def environments(self) -> list[str]:
        """The overlays available beside the base manifest."""
        return list_environments(self.directory)

    def node(self, key: str | tuple[str, ...]) -> Node | None:
        """The merged node at a dotted key (or key path), if present."""
        path = split_key(key) if isinstance(key, str) else key
        return node_at(self.tree, path)

    def origin(self, key: str | tuple[str, ...]) -> Origin | None:
        """Where the value at ``key`` was written."""
        found = self.node(key)
        return found.origin if found is not None else None

    def get(self, key: str, default: Any = None) -> Any:
        """The normalised value at a dotted key, or ``default``."""
        current: Any = self.data
        for part in split_key(key):
            if not isinstance(current, dict) or part not in current:
                return default
            current = current[part]
        return default if current is None else current

    def error(self, key: str, message: str, hint: str | None = None) -> ManifestError:
        """A ManifestError located at the value of ``key`` (for callers' checks)."""
        origin = self.origin(key)
        return ManifestError(
            f"{key}: {message}",
            location=origin.location() if origin else None,
            hint=hint,
        )

    def masked_data(self) -> Any:
        """The merged manifest as plain data, secrets masked (what ``config show --json``
        prints; safe to hash into a label or show)."""
        from fdl.manifest.render import show_data

        return show_data(self.tree)

    def explain(self, key: str | None = None) -> list[Explanation]:
        """Explain one key (every leaf below it) or every leaf.

        Raises:
            ManifestError: ``key`` was never written by any layer.
        """
        from fdl.manifest._explain import explain_paths, explainable_paths

        with _NoCyclicGC():
            return self._explain(key, explain_paths, explainable_paths)

    def write_explain(
        self,
        key: str | None,
        write: Callable[[str], object],
        *,
        show_secrets: bool = False,
        as_json: bool = False,
    ) -> None:
        """Hand ``render_explain(self.explain(key))`` to ``write`` in pieces (what
        ``config explain`` prints; ``as_json``: ``json.dumps(explain_data(...), indent=2,
        ensure_ascii=False, default=str) + "\n"``, what ``config explain --json`` prints),
        without making an explanation object per leaf where the stories are simple
        (:mod:`fdl.manifest._explain_text`).

        Raises:
            ManifestError: ``key`` was never written by any layer.
        """
        from fdl.manifest._explain_text import write_explain
        from fdl.manifest.render import JsonList, explain_json, render_explain

        prefix = split_key(key) if key else ()
        out = JsonList(write) if as_json else write
        render = explain_json if as_json else render_explain
        with _NoCyclicGC():
            if not write_explain(
                self.layers, self.tree, prefix, out, show_secrets=show_secrets, as_json=as_json
            ):
                explanations = self.explain(key)
                # Rendered in pieces: one text of every story held at once, then copied by
                # the write, was most of explain's memory above show's.
                for start in range(0, len(explanations), _EXPLAIN_PIECE):
                    piece = explanations[start : start + _EXPLAIN_PIECE]
                    out(render(piece, show_secrets=show_secrets))
        if isinstance(out, JsonList):
            out.close()

    def _explain(
        self, key: str | None, explain_paths: Any, explainable_paths: Any
    ) -> list[Explanation]:
        prefix = split_key(key) if key else ()
        paths = explainable_paths(self.layers, self.tree, prefix)
        if prefix and not paths:
            known = [dotted(p) for p in explainable_paths(self.layers, self.tree)]
            close = did_you_mean(key or "", known)
            hint = (
                f"did you mean {close!r}?"
                if close
                else "run `fdl config explain` to list every key"
            )
            raise ManifestError(f"no layer sets {key!r}", hint=hint)
        explained: list[Explanation] = explain_paths(self.layers, self.tree, paths)
        return explained


_EXPLAIN_PIECE = 500  # explanations rendered at a time by write_explain's long way


def _validate(tree: MapNode, schema: Obj) -> dict[str, Any]:
    checker = Checker()
    data = schema.check(tree, (), checker)
    if checker.errors:
        if len(checker.errors) == 1:
            raise checker.errors[0]
        raise ManifestErrors(checker.errors)
    return data if isinstance(data, dict) else {}


def _base_candidates(discovered: Discovered, root: Path) -> list[Candidate]:
    directory = discovered.directory
    out = []
    for name in BASE_NAMES:
        path = directory / name
        out.append(Candidate(LayerKind.BASE, name, path, path.is_file(), path == discovered.path))
    if discovered.example:
        out.append(
            Candidate(
                LayerKind.BASE,
                display_name(discovered.path, root),
                discovered.path,
                True,
                True,
                "example used read-only",
            )
        )
    return out


def build_manifest(
    discovered: Discovered,
    *,
    env: str | None,
    environ: Mapping[str, str],
    sets: Sequence[str],
    schema: Obj | None,
    overlay_required: bool = True,
    above: Sequence[Layer] = (),
    derived: Sequence[DerivedLayer] = (),
    env_aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> Manifest:
    """Read every layer of ``discovered``, merge and (optionally) validate.

    Args:
        env_aliases: Variables besides ``FDL__*`` that set one key each
            (:data:`fdl.manifest.sections.ENV_ALIASES`).
        above: Layers over ``--set``: a command's own options (:func:`value_layer`).
        derived: Functions that look at the merged values and may return one more layer,
            placed lowest (a recipe named by ``libtorch.build.recipe``).
    """
    with _NoCyclicGC():
        return _build_manifest(
            discovered,
            env=env,
            environ=environ,
            sets=sets,
            schema=schema,
            overlay_required=overlay_required,
            above=above,
            derived=derived,
            env_aliases=env_aliases,
        )


def _build_manifest(
    discovered: Discovered,
    *,
    env: str | None,
    environ: Mapping[str, str],
    sets: Sequence[str],
    schema: Obj | None,
    overlay_required: bool,
    above: Sequence[Layer],
    derived: Sequence[DerivedLayer],
    env_aliases: Mapping[str, tuple[str, ...]] | None,
) -> Manifest:
    root = discovered.directory
    base_chain = load_chain(discovered.path, LayerKind.BASE, root)
    candidates = [
        Candidate(LayerKind.INHERITED, layer.source, layer.path, True, True)
        for layer in base_chain[:-1]
    ]
    candidates.extend(_base_candidates(discovered, root))
    layers = list(base_chain)
    if env is not None:
        overlay = find_overlay(root, env, required=overlay_required)
        overlay_chain = load_chain(overlay, LayerKind.OVERLAY, root) if overlay else []
        candidates.extend(
            Candidate(LayerKind.INHERITED, layer.source, layer.path, True, True)
            for layer in overlay_chain[:-1]
        )
        candidates.extend(
            Candidate(LayerKind.OVERLAY, path.name, path, path.is_file(), path == overlay)
            for path in overlay_candidates(root, env)
        )
        layers.extend(overlay_chain)
    layers = dedupe(layers)
    used = {layer.path.resolve() for layer in layers if layer.path is not None}
    for other in list_environments(root):
        path = find_overlay(root, other, required=False)
        if other != env and path is not None and path.resolve() not in used:
            candidates.append(
                Candidate(
                    LayerKind.OVERLAY, path.name, path, True, False, f"select with --env {other}"
                )
            )
    patch = merge(layer.root for layer in layers)
    extra = env_layer(environ, materialize(patch), env_aliases)
    if extra is not None:
        layers.append(extra)
        patch = compose(patch, extra.root) if extra.root is not None else patch
    env_names = sorted(n for n in environ if n.startswith("FDL__"))
    env_names += [n for n in (env_aliases or {}) if environ.get(n)]
    candidates.append(
        Candidate(
            LayerKind.ENV,
            ", ".join(f"${n}" for n in env_names) if env_names else "FDL__* environment variables",
            None,
            extra is not None,
            extra is not None,
        )
    )
    overrides = set_layer(sets)
    if overrides is not None:
        layers.append(overrides)
        patch = compose(patch, overrides.root) if overrides.root is not None else patch
    candidates.append(
        Candidate(
            LayerKind.SET,
            ", ".join(f"--set {s}" for s in sets) if sets else "--set KEY=VALUE options",
            None,
            overrides is not None,
            overrides is not None,
        )
    )
    for layer in above:
        if layer.root is not None:
            layers.append(layer)
            patch = compose(patch, layer.root)
            candidates.append(Candidate(layer.kind, layer.source, layer.path, True, True))
    for provide in derived:
        lowest = provide(materialize(patch), root)
        if lowest is not None and lowest.root is not None:
            layers.insert(0, lowest)
            patch = compose(lowest.root, patch) if patch is not None else lowest.root
            candidates.insert(0, Candidate(lowest.kind, lowest.source, lowest.path, True, True))
    final = materialize(patch)
    tree = (
        final if isinstance(final, MapNode) else MapNode({}, Origin(discovered.path.name), None, {})
    )
    data = _validate(tree, schema) if schema is not None else tree.plain()
    return Manifest(
        path=discovered.path,
        directory=root,
        env=env,
        example=discovered.example,
        layers=layers,
        tree=tree,
        patch=patch,
        data=data,
        candidates=candidates,
    )


def merge_layers(layers: Sequence[Layer]) -> Node | None:
    """The values of ``layers`` (lowest first) merged, as the manifest would merge them."""
    return materialize(merge(layer.root for layer in layers))


def load_manifest(
    start: Path | None = None,
    *,
    manifest: Path | None = None,
    env: str | None = None,
    environ: Mapping[str, str] | None = None,
    sets: Sequence[str] = (),
    schema: Obj | bool | None = True,
) -> Manifest:
    """Find, read, merge and validate the project manifest.

    Args:
        start: Directory to search from (default: the working directory).
        manifest: An explicit manifest file (``-f/--manifest``).
        env: The environment overlay to apply (``--env``/``@NAME``/``FDL_ENV``).
        environ: Environment variables (default: ``os.environ``) for ``FDL__*``.
        sets: ``--set KEY=VALUE`` assignments, in order.
        schema: The schema to validate against; True for the root schema,
            None/False to skip validation.

    Raises:
        ManifestError: not found, unreadable, invalid, or the overlay is missing.
        UsageError: a malformed ``--set`` or environment name.
    """
    discovered = discover(start or Path.cwd(), manifest)
    return build_manifest(
        discovered,
        env=env,
        environ=os.environ if environ is None else environ,
        sets=sets,
        schema=_resolve_schema(schema),
        env_aliases=_env_aliases() if schema is True else None,
    )


def load_directory_manifest(
    directory: Path, *, env: str | None, schema: Obj | bool | None = None
) -> Manifest | None:
    """The manifest of a sub-directory (nested commands), with its overlay when present.

    Environment variables and ``--set`` apply to the root manifest only.
    """
    discovered = find_in_directory(directory)
    if discovered is None:
        return None
    return build_manifest(
        discovered,
        env=env,
        environ={},
        sets=(),
        schema=_resolve_schema(schema),
        overlay_required=False,
    )


def _env_aliases() -> dict[str, tuple[str, ...]]:
    from fdl.manifest.sections import env_aliases

    return env_aliases()


def _resolve_schema(schema: Obj | bool | None) -> Obj | None:
    if schema is True:
        from fdl.manifest.sections import root_spec

        return root_spec()
    if schema is False or schema is None:
        return None
    return schema
