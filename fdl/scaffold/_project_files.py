"""What a scaffold is made of: the answers, the planned files, what writing them did."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ACTIONS",
    "GENERATED",
    "MODES",
    "USER",
    "Answers",
    "FileResult",
    "FileSpec",
    "WriteReport",
]

MODES = ("mounted", "baked", "native")
# A generated file is fdl's (rewritten by `fdl init --force`); a user file is a
# starting point the user edits (never overwritten once it exists).
GENERATED = "generated"
USER = "user"
ACTIONS = (
    "created",
    "unchanged",
    "overwritten",
    "skipped",
    # fdl init --update
    "updated",  # the template changed it, you had not: the new version
    "merged",  # both changed it: merged without conflict
    "conflict",  # both changed the same lines: merged with git's conflict markers
    "kept",  # you changed it, the template did not: yours as it is
    "deleted",  # the template dropped it and you had not changed it
)


@dataclass(frozen=True)
class Answers:
    """Everything a template needs to know about the project.

    Attributes:
        name: The project's name (its directory's name).
        template: ``flodl`` or ``cpp``.
        mode: ``mounted`` (libtorch mounted into the dev container), ``baked``
            (libtorch in the image) or ``native`` (no containers).
        torch: The PyTorch version of the project's libtorch (``2.13.0``).
        example: Write the manifest as ``fdl.yml.example`` (committed) and keep
            ``fdl.yml`` local (ignored by git).
        gpus: The GPUs the project's CUDA commands are for (``6.1,12.0``): named with
            ``--gpus`` or detected on the machine that ran ``fdl init``; empty: none.
        driver: That machine's NVIDIA driver (``570.86``), when known.
        hf: The flodl template's HuggingFace playground (``flodl-hf/``), from
            ``--with-hf`` or ``fdl add flodl-hf``.
        flodl: The floDl release the project uses when ``fdl add flodl-hf`` found one in
            it (``0.8.0``): flodl-hf is pinned to it; empty: the template's.
    """

    name: str
    template: str
    mode: str
    torch: str
    example: bool = False
    gpus: str = ""
    driver: str = ""
    hf: bool = False
    flodl: str = ""

    @property
    def containers(self) -> bool:
        """Whether the project's commands run in containers."""
        return self.mode != "native"

    @property
    def manifest_file(self) -> str:
        return "fdl.yml.example" if self.example else "fdl.yml"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "template": self.template,
            "mode": self.mode,
            "torch": self.torch,
            "example": self.example,
            **({"gpus": self.gpus} if self.gpus else {}),
            **({"driver": self.driver} if self.driver else {}),
            **({"hf": True} if self.hf else {}),
            **({"flodl": self.flodl} if self.flodl else {}),
        }


@dataclass(frozen=True)
class FileSpec:
    """One file of a planned project.

    Attributes:
        path: Relative to the project, ``/``-separated.
        content: The exact text.
        mode: Permission bits.
        kind: :data:`GENERATED` or :data:`USER`.
    """

    path: str
    content: str
    mode: int = 0o644
    kind: str = USER


@dataclass(frozen=True)
class FileResult:
    """What writing one file did (or, in a dry run, would do).

    Attributes:
        path: Relative to the project.
        action: ``created``, ``unchanged``, ``overwritten`` or ``skipped``.
        kind: :data:`GENERATED` or :data:`USER`.
        reason: Why it was skipped.
        diff: For ``fdl init --update``: the unified diff from the file as it is to what
            is (or would be) written.
    """

    path: str
    action: str
    kind: str
    reason: str | None = None
    diff: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"path": self.path, "action": self.action, "kind": self.kind, "reason": self.reason}
        if self.diff is not None:
            data["diff"] = self.diff
        return data


@dataclass(frozen=True)
class WriteReport:
    """The outcome of writing a planned project.

    Attributes:
        directory: The project directory.
        results: One per planned file, in path order.
        dry_run: Nothing was written.
    """

    directory: Path
    results: tuple[FileResult, ...]
    dry_run: bool = False

    def paths(self, action: str) -> list[str]:
        """The files that had ``action``."""
        return [result.path for result in self.results if result.action == action]

    def counts(self) -> dict[str, int]:
        """How many files had each action."""
        counts = {action: len(self.paths(action)) for action in ACTIONS}
        # the actions of `fdl init --update` appear only when they happened
        return {a: n for a, n in counts.items() if n or a in ACTIONS[:4]}

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "dry_run": self.dry_run,
            "counts": self.counts(),
            "files": [result.to_json() for result in self.results],
        }
