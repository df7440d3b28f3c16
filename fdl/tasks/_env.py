"""Environment changes a command runs with: set a variable, or prepend to a path list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fdl.tasks._compose import quote

__all__ = ["EnvChange", "apply_changes", "export_line"]


@dataclass(frozen=True)
class EnvChange:
    """One variable a command gets.

    Attributes:
        name: The variable.
        value: Its value, or the entry to put in front of the existing list.
        prepend: True for ``:``-separated lists (``LD_LIBRARY_PATH``): the
            value goes first and an existing value is kept after it.
    """

    name: str
    value: str
    prepend: bool = False

    def describe(self) -> str:
        """``NAME=value`` (``NAME=value:$NAME`` for prepends), for help text."""
        if self.prepend:
            return f"{self.name}={self.value}:${self.name}"
        return f"{self.name}={self.value}"


def apply_changes(environ: Mapping[str, str], changes: Iterable[EnvChange]) -> dict[str, str]:
    """A copy of ``environ`` with ``changes`` applied in order."""
    env = dict(environ)
    for change in changes:
        existing = env.get(change.name, "")
        if change.prepend and existing:
            entries = [e for e in existing.split(":") if e and e != change.value]
            env[change.name] = ":".join([change.value, *entries])
        else:
            env[change.name] = change.value
    return env


def export_line(change: EnvChange) -> str:
    """A POSIX shell ``export`` that makes ``change`` (prepends keep the old value)."""
    value = quote(change.value)
    if change.prepend:
        name = change.name
        return f'export {name}={value}"${{{name}:+:${name}}}"'
    return f"export {change.name}={value}"
