"""``fdl --help``: built-ins, the project's commands and its environments."""

from __future__ import annotations

from fdl import __version__
from fdl.cli._globals import GLOBAL_OPTIONS_HELP
from fdl.cli._registry import BUILTINS
from fdl.cli._session import Session
from fdl.errors import ManifestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.manifest import Manifest

__all__ = ["render_top_help"]


def _rows(rows: list[tuple[str, str]], indent: int = 2) -> list[str]:
    from fdl.manifest import shown_text  # a token-shaped description masked

    width = max((len(left) for left, _ in rows), default=0) + 2
    return [f"{' ' * indent}{left:<{width}}{shown_text(right)}".rstrip() for left, right in rows]


def _here_rows(session: Session, manifest: Manifest) -> list[str]:
    """In a nested manifest's directory: its commands, which run by their own name here."""
    if not session.nested_words:
        return []
    from fdl.tasks import load_nested

    try:
        nested = load_nested(session.discovered_here, session.env, manifest.directory)
    except ManifestError:
        return []
    commands = (nested.data.get("commands") or {}) if nested is not None else {}
    if not commands:
        return []
    words = " ".join(session.nested_words)
    rows = [
        (name, (spec or {}).get("description") or (spec or {}).get("run") or "")
        for name, spec in commands.items()
    ]
    return [
        "",
        f"Commands of this directory (`fdl <command>` here is `fdl {words} <command>`):",
    ] + [row.split("\n")[0] for row in _rows(rows)]


def render_top_help(session: Session) -> str:
    """The top-level help text (manifest problems are shown, not raised)."""
    lines = [
        f"fdl {__version__} - toolchain for libtorch training projects",
        "",
        "Usage: fdl [global options] <command> [arguments]",
        "       fdl [global options] <project-command> [-- arguments for it]",
        "",
        "Global options (only before the command):",
        *_rows(GLOBAL_OPTIONS_HELP),
        "",
        "Built-in commands:",
        *_rows([(b.name, b.summary) for b in BUILTINS.values()]),
    ]
    try:
        manifest = session.manifest_or_none()
    except ManifestError as error:
        lines += ["", f"Project commands: unavailable, the manifest has a problem: {error}"]
        manifest = None
    if manifest is not None:
        from fdl.cli._project_list import command_rows

        rows = command_rows(manifest, session.env)
        title = manifest.data.get("description")
        if title:
            from fdl.manifest import shown_text

            title = shown_text(str(title))
        header = f"Project commands ({manifest.path.name}{': ' + title if title else ''}):"
        lines += ["", header, *(_rows(rows) if rows else ["  (none declared)"])]
        lines += _here_rows(session, manifest)
        envs = manifest.environments()
        if envs:
            active = session.env
            commands = manifest.data.get("commands") or {}
            shown = []
            for env in envs:
                tags = ["active"] if env == active else []
                tags += ["also a command"] if env in BUILTINS or env in commands else []
                shown.append(f"{env} ({', '.join(tags)})" if tags else env)
            lines += [
                "",
                f"Environments: {', '.join(shown)}   "
                "(select with --env NAME, @NAME or `fdl NAME <command>`)",
            ]
            if any(e in BUILTINS or e in commands for e in envs):
                lines.append(
                    "  a NAME that is also a command selects the environment only when "
                    "<command> is a command that NAME does not take"
                )
    lines += [
        "",
        "Examples:",
        *_rows(
            [
                ("fdl setup", "detect the GPUs and install the libtorch that fits"),
                ("fdl init my-model --template cpp", "a new project that builds and trains"),
                ("fdl libtorch build --archs 6.1,12.0 --dry-run", "a source build, planned"),
                ("fdl --env ci test -- -v", "a project command with the ci overlay"),
            ]
        ),
        "",
        "Exit codes: 0 ok, 1 failed (a build, a check), 2 usage, 3 manifest, "
        "4 environment, 5 network,",
        "            130 interrupted, 143 terminated, 70 a bug in fdl (run with -v and report it).",
        "",
        "Run `fdl <command> --help` for the options of a command.",
    ]
    return "\n".join(lines) + "\n"
