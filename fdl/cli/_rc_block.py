"""The completion block ``fdl autocomplete`` keeps in a shell's start-up file.

floDl's ``fdl autocomplete`` (flodl-cli-0.8.0/src/completions/mod.rs:367-480): the shell from
``$SHELL`` (bash when unknown), its rc file (``~/.bashrc``, ``~/.zshrc``,
``~/.config/fish/config.fish``), and one block between ``# fdl shell completions`` and
``# fdl shell completions end`` that evaluates ``fdl completions SHELL``. The same markers,
so running either tool's ``autocomplete`` replaces the block instead of adding a second.
Pure: the command reads and writes the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["MARKER", "SHELLS", "detect_shell", "rc_file", "with_block"]

MARKER = "# fdl shell completions"
SHELLS = ("bash", "zsh", "fish")
_LOADERS = {
    "bash": 'eval "$(fdl completions bash)"',
    "zsh": 'eval "$(fdl completions zsh)"',
    "fish": "eval (fdl completions fish | string collect)",
}
_RC = {"bash": ".bashrc", "zsh": ".zshrc", "fish": ".config/fish/config.fish"}


def detect_shell(environ: Mapping[str, str]) -> str:
    """The login shell's kind from ``$SHELL``, as floDl reads it (bash by default)."""
    shell = environ.get("SHELL", "")
    return next((name for name in ("fish", "zsh", "bash") if name in shell), "bash")


def rc_file(shell: str, home: Path) -> Path:
    """The start-up file the block goes into."""
    return home / _RC[shell]


def with_block(text: str, shell: str) -> str:
    """``text`` with any earlier block removed and the block for ``shell`` at its end."""
    end = f"{MARKER} end"
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped == MARKER:
            skipping = True
        elif stripped == end:
            skipping = False
        elif not skipping:
            kept.append(line)
    # The blank line floDl puts before the block is taken off again, so runs do not pile up.
    body = "".join(kept).rstrip("\n")
    if body:
        body += "\n"
    return f"{body}\n{MARKER}\n{_LOADERS[shell]}\n{end}\n"
