"""A source build's finished tree as a source: the ``build`` source.

:mod:`fdl.libtorch.build` plans and runs the build (hours; docker or native), verifies the
libraries it made, then hands their tree to :func:`~fdl.libtorch.register_variant`, which
installs it as a :class:`FromBuild`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from fdl._files import copy_tree
from fdl.libtorch import variants
from fdl.libtorch._install import Target

__all__ = ["FromBuild", "place_tree"]


@dataclass(frozen=True)
class FromBuild:
    """A source build's verified tree, with the metadata the build wrote.

    Attributes:
        tree: The tree the build installed into (its staging directory).
        info: What the build knows (``source={"kind": "build", ...}``, the archs asked for,
            the toolchain); ``name`` is the variant the plan names (``builds/sm61-sm120``).
        move: Move the tree (a rename on the same file system) instead of copying it.
    """

    tree: Path
    info: variants.VariantInfo
    move: bool = True

    kind = "build"

    @property
    def default_name(self) -> str:
        return self.info.name or f"builds/{self.tree.name}"

    def describe(self) -> str:
        info = self.info
        archs = " ".join(info.archs_requested) or "the CPU"
        how = info.source.get("recipe") or info.source.get("backend") or "fdl libtorch build"
        return f"libtorch {info.torch or '(unknown version)'} built from source for {archs} ({how})"

    def is_current(self, path: Path) -> bool:
        """False: a finished build replaces the variant it names."""
        return False

    def refusal(self, target: Target) -> None:
        """None: what fdl made there is replaced (never what it did not make, see
        :func:`~fdl.libtorch._install.check_replaceable`)."""
        return None

    def populate(self, tree: Path) -> variants.VariantInfo:
        place_tree(self.tree, tree, move=self.move)
        return self.info


def place_tree(source: Path, tree: Path, *, move: bool) -> None:
    """Put the finished tree ``source`` at ``tree`` (the staging directory): moved (a
    rename on the same file system) or copied (symlinks as symlinks)."""
    if move:
        shutil.move(str(source), str(tree))
    else:
        copy_tree(source, tree)
