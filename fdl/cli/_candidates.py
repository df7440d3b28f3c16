"""What completion works with: the candidates it answers, and what the words before the
cursor said. Shared by the global part (:mod:`._complete`) and the command part
(:mod:`._complete_commands`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Completion", "CompletionContext"]


@dataclass
class Completion:
    """Candidates for the word being completed, or a request for file names."""

    candidates: list[tuple[str, str]] = field(default_factory=list)
    directive: str | None = None

    def add(self, value: str, description: str = "") -> None:
        self.candidates.append((value, description))


@dataclass
class CompletionContext:
    """What the words before the cursor said (global options, command)."""

    cwd: Path
    environ: dict[str, str]
    env: str | None = None
    manifest_file: Path | None = None
    rest: list[str] = field(default_factory=list)

    def manifest(self) -> Any:
        from fdl.manifest import discover, load_manifest
        from fdl.tasks import enclosing_manifest

        try:
            explicit = self.manifest_file
            if explicit is None:
                explicit = enclosing_manifest(discover(self.cwd).path)
            return load_manifest(self.cwd, manifest=explicit, env=self.env, environ=self.environ)
        except Exception:
            return None
