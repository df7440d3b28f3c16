"""``fdl config show`` without loading typer.

Scripts and editors call ``config show`` often; typer and its parser cost
about 50 ms to import, more than the rest of the command. This recognises the
plain forms of ``config show`` and calls the same action the typer command
calls; anything else (``--help``, unknown options) goes through typer, which
reports it properly. ``tests/cli/test_fastpath.py`` checks both paths agree.
"""

from __future__ import annotations

from fdl.cli._console import Console
from fdl.cli._globals import GlobalOptions

__all__ = ["try_fast_path"]

_FLAGS = {"--json": "as_json", "--no-origin": "no_origin", "--show-secrets": "show_secrets"}


def try_fast_path(options: GlobalOptions, rest: list[str], console: Console) -> int | None:
    """Run ``config show`` directly when its arguments are simple; else None."""
    if options.help or rest[:2] != ["config", "show"]:
        return None
    flags = {"as_json": False, "no_origin": False, "show_secrets": False}
    env: str | None = None
    args = rest[2:]
    index = 0
    while index < len(args):
        token = args[index]
        if token in _FLAGS:
            flags[_FLAGS[token]] = True
        elif (
            token in ("--env", "-e")
            and index + 1 < len(args)
            and not args[index + 1].startswith("-")
        ):
            env = args[index + 1]
            index += 1
        elif token.startswith("--env=") and len(token) > len("--env="):
            env = token.split("=", 1)[1]
        else:
            return None
        index += 1
    from fdl.cli import _config_actions
    from fdl.cli._session import install

    session = install(options, console)
    return _config_actions.show(
        session,
        env=env,
        as_json=flags["as_json"],
        origins=not flags["no_origin"],
        show_secrets=flags["show_secrets"],
    )
