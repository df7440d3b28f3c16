"""A line-based three-way merge (diff3), pure: what ``fdl init --update`` does to a
project file that both the user and the template changed.

The base is what fdl wrote last time (kept in ``.fdl/template/``), "yours" the file as
it is now, "new" what the current template writes with the recorded answers. Hunks only
one side changed are taken from that side; hunks both changed the same way are taken
once; hunks both changed differently become a conflict marked as git marks them.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

__all__ = ["MergeResult", "merge3"]


@dataclass(frozen=True)
class MergeResult:
    """The merged text and how many hunks conflict."""

    text: str
    conflicts: int


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # markers and joins need whole lines
    return lines


def _matches(base: list[str], other: list[str]) -> dict[int, int]:
    """Base line index -> the index of the same line in ``other`` (monotonic)."""
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    found: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            found[block.a + offset] = block.b + offset
    return found


def merge3(
    base: str, yours: str, new: str, *, labels: tuple[str, str, str] = ("yours", "base", "new")
) -> MergeResult:
    """Merge the changes from ``base`` to ``yours`` and from ``base`` to ``new``.

    Args:
        labels: Names written after the conflict markers (yours, base, new).
    """
    if yours == new:
        return MergeResult(yours, 0)
    if yours == base:
        return MergeResult(new, 0)
    if new == base:
        return MergeResult(yours, 0)
    o, a, b = _lines(base), _lines(yours), _lines(new)
    in_a, in_b = _matches(o, a), _matches(o, b)
    out: list[str] = []
    conflicts = 0
    io = ia = ib = 0

    def resolve(o_part: list[str], a_part: list[str], b_part: list[str]) -> None:
        nonlocal conflicts
        if b_part in (a_part, o_part):
            out.extend(a_part)
        elif a_part == o_part:
            out.extend(b_part)
        else:
            conflicts += 1
            out.append(f"<<<<<<< {labels[0]}\n")
            out.extend(a_part)
            out.append(f"||||||| {labels[1]}\n")
            out.extend(o_part)
            out.append("=======\n")
            out.extend(b_part)
            out.append(f">>>>>>> {labels[2]}\n")

    while True:
        # the next base line both sides kept, at or after where each side stands
        sync = next(
            (
                i
                for i in range(io, len(o))
                if i in in_a and i in in_b and in_a[i] >= ia and in_b[i] >= ib
            ),
            None,
        )
        if sync is None:
            resolve(o[io:], a[ia:], b[ib:])
            break
        if sync == io and in_a[sync] == ia and in_b[sync] == ib:
            out.append(o[sync])
            io, ia, ib = io + 1, ia + 1, ib + 1
            continue
        resolve(o[io:sync], a[ia : in_a[sync]], b[ib : in_b[sync]])
        io, ia, ib = sync, in_a[sync], in_b[sync]
    return MergeResult("".join(out), conflicts)
