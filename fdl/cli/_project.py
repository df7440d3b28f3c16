"""Running the project's own commands (``fdl <name>`` for names in fdl.yml)."""

from __future__ import annotations

from fdl._text import did_you_mean
from fdl.cli._registry import BUILTINS
from fdl.cli._session import Session
from fdl.errors import UsageError

__all__ = ["run_project_command"]


def run_project_command(session: Session, name: str, args: list[str]) -> int:
    """Run the manifest command ``name`` with ``args``; return its exit code.

    Raises:
        UsageError: no such command (with a did-you-mean over built-ins and commands).
    """
    manifest = session.manifest_or_none()
    commands = (manifest.data.get("commands") or {}) if manifest is not None else {}
    if name not in commands:
        known = [*BUILTINS, *commands]
        close = did_you_mean(name, known)
        hint = f"did you mean `fdl {close}`?" if close else "run `fdl --help` to list the commands"
        where = f" in {manifest.path.name}" if manifest is not None else " (no fdl.yml found)"
        raise UsageError(f"unknown command {name!r}{where}", hint=hint)
    raise UsageError(f"running project commands is not available yet ({name!r})")
