"""Small text helpers shared by the CLI and the core."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["did_you_mean", "plural"]


def did_you_mean(word: str, options: Sequence[str]) -> str | None:
    """The closest option to ``word``, if one is close enough."""
    import difflib

    matches = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return matches[0] if matches else None


def plural(count: int, word: str) -> str:
    """``3 files``, ``1 file``."""
    return f"{count} {word}{'' if count == 1 else 's'}"
