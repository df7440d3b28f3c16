"""Terminal output: data on stdout, messages on stderr, colour and verbosity.

Colour is on when stderr is a terminal, unless ``--no-color`` or ``NO_COLOR``
says otherwise (``FORCE_COLOR`` forces it on).
"""

from __future__ import annotations

import os
import sys

from fdl._text import public_url, terminal_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TextIO

__all__ = ["Console", "wants_color"]

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def wants_color(stream: TextIO, no_color: bool, environ: Mapping[str, str]) -> bool:
    """Whether to colour output written to ``stream``."""
    if no_color or environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and environ.get("TERM") != "dumb"


class Console:
    """Where the CLI writes. The core never prints; it returns values or reports progress.
    Every URL's user info is hidden on the way out (:func:`fdl._text.public_url`).

    Args:
        verbosity: 0 quiet, 1 normal, 2+ verbose.
        color: Colour messages on stderr.
    """

    def __init__(
        self,
        verbosity: int = 1,
        color: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.verbosity = verbosity
        self.color = color
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self._notes_said: set[str] = set()
        self._out_terminal: bool | None = None  # stdout is a terminal (asked once)
        # `config show --show-secrets`: the user asked to see them, URL passwords too
        self.reveal_secrets = False

    @staticmethod
    def shown(text: str) -> str:
        """``text`` as a message line reaches the terminal: no URL's user info, no control
        character but line breaks, tabs and colour codes (:func:`terminal_text`)."""
        return terminal_text(public_url(text))

    def style(self, text: str, *styles: str) -> str:
        """``text`` wrapped in ANSI styles when colour is on."""
        if not self.color or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def out(self, text: str = "", end: str = "\n") -> None:
        """Write data (what scripts consume) to stdout."""
        if self._out_terminal is None:
            isatty = getattr(self.stdout, "isatty", None)
            self._out_terminal = bool(isatty and isatty())
        # data piped on is left as it is (a --dry-run script piped into sh); on a terminal,
        # the terminal's rule applies to it as to messages
        hidden = text if self.reveal_secrets else public_url(text)
        shown = terminal_text(hidden) if self._out_terminal else hidden
        self.stdout.write(shown + end)
        self.stdout.flush()

    def json(self, data: Any) -> None:
        """Write ``data`` as indented JSON to stdout."""
        import json

        self.out(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def info(self, text: str) -> None:
        """A progress or status message (hidden with -q)."""
        if self.verbosity >= 1:
            self.stderr.write(self.shown(text) + "\n")
            self.stderr.flush()

    def debug(self, text: str) -> None:
        """A detail shown with -v."""
        if self.verbosity >= 2:
            self.stderr.write(self.style(self.shown(text), "dim") + "\n")

    def note(self, text: str, *, once_key: str | None = None) -> None:
        """A ``note:`` line on stderr; with ``once_key``, said at most once."""
        if once_key is not None:
            if once_key in self._notes_said:
                return
            self._notes_said.add(once_key)
        if self.verbosity >= 1:
            self.stderr.write(f"{self.style('note:', 'cyan')} {self.shown(text)}\n")

    def warn(self, text: str) -> None:
        """A ``warning:`` line on stderr (shown even with -q)."""
        self.stderr.write(f"{self.style('warning:', 'yellow', 'bold')} {self.shown(text)}\n")

    def error(self, text: str) -> None:
        """An ``error:`` line on stderr."""
        self.stderr.write(f"{self.style('error:', 'red', 'bold')} {self.shown(text)}\n")
        self.stderr.flush()

    def line(self, text: str) -> None:
        """A raw line on stderr (continuations of errors and notes)."""
        self.stderr.write(self.shown(text) + "\n")


def from_environment(
    verbosity: int, no_color: bool, environ: Mapping[str, str] | None = None, *, ansi: bool = False
) -> Console:
    """A console configured from the global options and the environment (``--ansi``:
    colours whatever the terminal and ``NO_COLOR`` say, as floDl's CLI)."""
    env = os.environ if environ is None else environ
    return Console(verbosity=verbosity, color=ansi or wants_color(sys.stderr, no_color, env))
