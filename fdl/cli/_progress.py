"""Progress for long work (downloads, builds) on stderr.

On a terminal the status line is rewritten in place; otherwise (CI logs) a
plain line is printed at most every ``interval`` seconds, so logs stay short.
"""

from __future__ import annotations

import time

from fdl.cli._console import Console

__all__ = ["ProgressLine", "human_bytes", "human_duration"]


def human_bytes(count: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def human_duration(seconds: float) -> str:
    """``3725`` -> ``1h02m05s``."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class ProgressLine:
    """A single status line for one long operation."""

    def __init__(self, console: Console, label: str, *, interval: float = 5.0) -> None:
        self.console = console
        self.label = label
        self.interval = interval
        self.started = time.monotonic()
        self._last_print: float | None = None
        self._width = 0
        self._tty = bool(getattr(console.stderr, "isatty", lambda: False)())
        self._enabled = console.verbosity >= 1

    def _emit(self, text: str, *, force: bool = False) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if self._tty:
            if not force and self._last_print is not None and now - self._last_print < 0.1:
                return
            text = self.console.shown(text)
            pad = max(self._width - len(text), 0)
            self.console.stderr.write("\r" + text + " " * pad)
            self.console.stderr.flush()
            self._width = len(text)
        else:
            if (
                not force
                and self._last_print is not None
                and now - self._last_print < self.interval
            ):
                return
            self.console.stderr.write(self.console.shown(text) + "\n")
            self.console.stderr.flush()
        self._last_print = now

    def bytes(self, done: int, total: int | None, rate: float | None = None) -> None:
        """Report a byte count (downloads)."""
        elapsed = human_duration(time.monotonic() - self.started)
        if total:
            pct = 100.0 * done / total
            text = f"{self.label}: {human_bytes(done)} / {human_bytes(total)} ({pct:.0f}%)"
        else:
            text = f"{self.label}: {human_bytes(done)}"
        if rate:
            text += f", {human_bytes(rate)}/s"
        self._emit(f"{text}, {elapsed}", force=bool(total and done >= total))

    def status(self, detail: str, fraction: float | None = None) -> None:
        """Report free-form progress (builds: ``[123/456] Building CXX object ...``)."""
        elapsed = human_duration(time.monotonic() - self.started)
        pct = f" {100 * fraction:.0f}%" if fraction is not None else ""
        detail = detail if len(detail) <= 90 else detail[:87] + "..."
        self._emit(f"{self.label}{pct} [{elapsed}] {detail}")

    def message(self, text: str) -> None:
        """A line of its own, without garbling the status line."""
        if self._tty and self._width:
            self.console.stderr.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.console.info(text)

    def close(self, final: str | None = None) -> None:
        """End the status line, optionally with a final message."""
        if self._tty and self._width:
            self.console.stderr.write("\r" + " " * self._width + "\r")
            self._width = 0
        if final:
            elapsed = human_duration(time.monotonic() - self.started)
            self.console.info(f"{final} ({elapsed})")
