"""``fdl config``: the merged manifest, where each value came from, its schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli import _config_actions as actions
from fdl.cli.commands._common import JsonOption, group

app = group(
    "config",
    "Show, explain and validate the merged manifest.\n\nExample: fdl config show --env ci",
    no_args_is_help=True,
)

EnvOption = Annotated[
    str | None,
    typer.Option("--env", "-e", help="Environment overlay (default: the global one)."),
]
SecretsOption = Annotated[
    bool, typer.Option("--show-secrets", help="Show secret values instead of ***.")
]


def normalize(args: list[str]) -> list[str]:
    """``fdl config --explain [KEY]`` is ``fdl config explain [KEY]``."""
    if args and args[0] == "--explain":
        return ["explain", *args[1:]]
    if args and args[0].startswith("--explain="):
        return ["explain", args[0].split("=", 1)[1], *args[1:]]
    return args


@app.command()
def show(
    ctx: typer.Context,
    environment: Annotated[
        str | None,
        typer.Argument(
            help="The environment, as --env (floDl's `fdl config show ci`).", show_default=False
        ),
    ] = None,
    env: EnvOption = None,
    as_json: JsonOption = False,
    no_origin: Annotated[
        bool, typer.Option("--no-origin", help="Leave out the origin comments.")
    ] = False,
    show_secrets: SecretsOption = False,
) -> None:
    """Print the merged manifest, each value annotated with the file:line it came from.

    Example: fdl config show --env ci
    """
    if environment is not None:
        if env is not None and env != environment:
            from fdl.errors import UsageError

            raise UsageError(
                f"fdl config show: two environments, {environment!r} and --env {env}",
                hint=f"name one: `fdl config show {env}`",
            )
        env = environment
    raise typer.Exit(
        actions.show(
            ctx.obj, env=env, as_json=as_json, origins=not no_origin, show_secrets=show_secrets
        )
    )


@app.command()
def explain(
    ctx: typer.Context,
    key: Annotated[str | None, typer.Argument(help="Dotted key, e.g. commands.test.run.")] = None,
    env: EnvOption = None,
    as_json: JsonOption = False,
    show_secrets: SecretsOption = False,
) -> None:
    """For each value: the layer that won (file:line:col), and what it overrode.

    Example: fdl config explain commands.test --env ci
    """
    raise typer.Exit(
        actions.explain(ctx.obj, key, env=env, as_json=as_json, show_secrets=show_secrets)
    )


@app.command()
def layers(ctx: typer.Context, env: EnvOption = None, as_json: JsonOption = False) -> None:
    """List every candidate layer in precedence order, whether it exists and was used.

    Example: fdl config layers --env ci
    """
    raise typer.Exit(actions.layers(ctx.obj, env=env, as_json=as_json))


@app.command()
def schema(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file.")
    ] = None,
) -> None:
    """Print the manifest's JSON Schema (for editors validating fdl.yml).

    Example: fdl config schema -o .vscode/fdl.schema.json
    """
    raise typer.Exit(actions.schema(ctx.obj, output))


@app.command()
def validate(
    ctx: typer.Context,
    env: EnvOption = None,
    all_envs: Annotated[
        bool, typer.Option("--all-envs", help="Validate every overlay too.")
    ] = False,
) -> None:
    """Check the manifest (and overlays) against the schema; exit 3 on problems.

    Example: fdl config validate --all-envs
    """
    raise typer.Exit(actions.validate(ctx.obj, env=env, all_envs=all_envs))
