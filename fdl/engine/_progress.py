"""Reading build progress: which steps ran and which came from the cache.

BuildKit's plain progress (``--progress=plain``) names a step on a line
``#5 [stage-0 2/3] RUN make`` and later says ``#5 CACHED`` or ``#5 DONE 1.2s``.
The classic builder prints ``Step 2/3 : RUN make`` followed by
`` ---> Using cache`` when the step was cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fdl.engine._types import BuildStep

__all__ = ["BuildProgress"]

_BK_STEP = re.compile(r"^#(\d+) \[([^\]]+)\] (.+)$")
_BK_CACHED = re.compile(r"^#(\d+) CACHED\s*$")
_CLASSIC_STEP = re.compile(r"^Step \d+/\d+ : (.+)$")
_CLASSIC_CACHED = " ---> Using cache"


@dataclass
class _Vertex:
    stage: str
    name: str
    cached: bool = False


@dataclass
class BuildProgress:
    """Feed it the lines of a build; ask it for the steps."""

    _vertices: dict[str, _Vertex] = field(default_factory=dict)
    _classic: list[_Vertex] = field(default_factory=list)

    def feed(self, line: str) -> None:
        """Take one line of build output."""
        text = line.rstrip()
        step = _BK_STEP.match(text)
        if step is not None:
            number, stage, name = step.groups()
            if stage != "internal" and number not in self._vertices:
                self._vertices[number] = _Vertex(stage, name)
            return
        cached = _BK_CACHED.match(text)
        if cached is not None:
            vertex = self._vertices.get(cached.group(1))
            if vertex is not None:
                vertex.cached = True
            return
        classic = _CLASSIC_STEP.match(text)
        if classic is not None:
            self._classic.append(_Vertex("", classic.group(1)))
            return
        if text.startswith(_CLASSIC_CACHED) and self._classic:
            self._classic[-1].cached = True

    @property
    def steps(self) -> list[BuildStep]:
        """The build's steps in order, without the FROM steps (they only name a base)."""
        vertices = list(self._vertices.values()) + self._classic
        return [
            BuildStep(v.name, v.cached, v.stage)
            for v in vertices
            if not v.name.upper().startswith("FROM ")
        ]
