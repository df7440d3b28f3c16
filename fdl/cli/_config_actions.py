"""``fdl config`` actions, free of typer so the fast path can call them too."""

from __future__ import annotations

from pathlib import Path

from fdl.cli._session import Session

TYPE_CHECKING = False  # typing stays out of the fast path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ParamSpec

    from fdl.images import ImageDefault

    P = ParamSpec("P")

__all__ = ["explain", "layers", "schema", "show", "validate"]


def _gc_paused(action: Callable[P, int]) -> Callable[P, int]:
    """``action`` with the cyclic garbage collector paused while it runs: a manifest's
    nodes hold no cycles, and with 10,000 commands every full collection walked their
    million objects again (two thirds of ``config show``'s rendering)."""
    import functools

    @functools.wraps(action)
    def paused(*args: P.args, **kwargs: P.kwargs) -> int:
        import gc

        enabled = gc.isenabled()
        gc.disable()
        try:
            return action(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@_gc_paused
def show(
    session: Session, *, env: str | None, as_json: bool, origins: bool, show_secrets: bool
) -> int:
    """Print the merged manifest (YAML with origins, or JSON)."""
    from fdl.manifest.render import render_show, show_data

    session.console.reveal_secrets = show_secrets
    manifest = session.manifest(env)
    if as_json:
        session.console.json(show_data(manifest.tree, show_secrets=show_secrets))
    else:
        session.console.out(
            render_show(manifest.tree, origins=origins, show_secrets=show_secrets), end=""
        )
    return 0


@_gc_paused
def explain(
    session: Session, key: str | None, *, env: str | None, as_json: bool, show_secrets: bool
) -> int:
    """Explain one key (or every leaf): winner, layer, what it overrode."""
    session.console.reveal_secrets = show_secrets
    manifest = session.manifest(env)
    if key is not None and manifest.get(key) is None:
        from fdl.images import image_default

        default = image_default(manifest, key)
        if default is not None:  # no layer sets it: fdl's default applies, from its data
            return _explain_default(session, default, as_json=as_json)
    console = session.console
    manifest.write_explain(
        key, lambda text: console.out(text, end=""), show_secrets=show_secrets, as_json=as_json
    )
    return 0


def _explain_default(session: Session, default: ImageDefault, *, as_json: bool) -> int:
    if as_json:
        session.console.json(
            [
                {
                    "key": default.key,
                    "value": default.value,
                    "layer": "default",
                    "source": default.source,
                }
            ]
        )
        return 0
    session.console.out(f"{default.key} = {default.value}")
    session.console.out("  set by        fdl's default  (no layer sets it)")
    session.console.out(f"  from          {default.source}")
    return 0


def layers(session: Session, *, env: str | None, as_json: bool) -> int:
    """List every candidate layer in precedence order and whether it was used."""
    from fdl.manifest.render import layers_data, render_layers

    manifest = session.manifest(env, validate=False)
    if as_json:
        session.console.json(layers_data(manifest.candidates))
    else:
        session.console.out(render_layers(manifest.candidates, manifest.env), end="")
    return 0


def schema(session: Session, output: Path | None) -> int:
    """Print (or write) the manifest's JSON Schema."""
    from fdl._files import atomic_write_text
    from fdl.manifest.sections import schema_document

    document = schema_document()
    import json

    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if output is None:
        session.console.out(text, end="")
    else:
        _check_schema_target(output, str(document["$id"]))
        atomic_write_text(output, text)
        session.console.info(f"wrote {output}")
    return 0


def _check_schema_target(path: Path, schema_id: str) -> None:
    """Refuse to replace what is not a schema fdl wrote (its ``$id``), or not a file."""
    import json

    from fdl._files import NotARegularFile, output_refusal, read_small_text
    from fdl.errors import UsageError

    problem = output_refusal(path)
    if problem is not None:
        raise UsageError(problem, hint="give -o a new file, e.g. -o .fdl/fdl.schema.json")
    try:
        current = read_small_text(path, limit=16 << 20)
        existing = json.loads(current) if current else None
    except (NotARegularFile, ValueError):
        existing = {}
    if existing is not None and not (
        isinstance(existing, dict) and existing.get("$id") == schema_id
    ):
        raise UsageError(
            f'{path} is not a schema fdl wrote (no "$id": {schema_id!r}), and -o would replace it',
            hint="give -o another file, or move this one aside",
        )


def validate(session: Session, *, env: str | None, all_envs: bool) -> int:
    """Validate the base manifest and the selected (or every) overlay."""
    base = session.manifest(None)
    envs = (
        base.environments() if all_envs else ([env or session.env] if (env or session.env) else [])
    )
    checked = ["base"]
    for name in envs:
        assert name is not None
        session.manifest(name)
        checked.append(name)
    session.console.info(f"{base.path.name}: valid ({', '.join(checked)})")
    return 0
