"""A libtorch tree on disk as a source: the ``directory`` source, and the registration of a
tree made elsewhere.

``fdl libtorch install --from-dir`` (:func:`install_dir`) copies a tree (``lib/``,
``include/``, ``share/``) into the layout as a :class:`FromDirectory`; a source build
hands its finished tree to :func:`register_variant` (a :class:`FromBuild`). A tree that
already sits where the variant goes is adopted in place: its metadata is written there,
nothing is moved.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fdl.errors import UsageError
from fdl.libtorch import variants
from fdl.libtorch._install import (
    InstallResult,
    Target,
    activate_target,
    check_tree,
    finish_info,
    path_contains,
    protected_paths,
    real_path,
    resolve_target,
    variant_lock,
)
from fdl.libtorch.sources import REPLACE_HINT, install_source
from fdl.libtorch.sources._build import FromBuild, place_tree
from fdl.paths import Context

__all__ = ["FromDirectory", "install_dir", "register_variant"]


@dataclass(frozen=True)
class FromDirectory:
    """A libtorch tree on disk, copied into the variant (or moved).

    Attributes:
        tree: The tree (``lib/``, ``include/``, ``share/``).
        info: What is known of it (default: only where it came from).
        move: Move the tree (a rename on the same file system) instead of copying it.
    """

    tree: Path
    info: variants.VariantInfo | None = None
    move: bool = False

    kind = "directory"

    @property
    def default_name(self) -> str:
        return f"precompiled/{self.tree.name}"

    def describe(self) -> str:
        return f"the libtorch tree in {self.tree} ({'moved' if self.move else 'copied'})"

    def is_current(self, path: Path) -> bool:
        """False: a tree says nothing to compare an installed variant with; it is installed
        again (:func:`install_dir` refuses a name that is taken, unless ``force``)."""
        return False

    def refusal(self, target: Target) -> None:
        """None: what fdl made there is replaced."""
        return None

    def populate(self, tree: Path) -> variants.VariantInfo:
        place_tree(self.tree, tree, move=self.move)
        if self.info is not None:
            return self.info
        return variants.VariantInfo(
            name="", source={"kind": "directory", "directory": str(self.tree)}
        )


def install_dir(
    context: Context,
    tree: Path,
    *,
    name: str | None = None,
    force: bool = False,
    activate: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> InstallResult:
    """Add an existing libtorch tree (``lib/``, ``include/``, ``share/``) as a variant.

    The tree is copied to ``precompiled/<name or its directory name>`` (a name with a ``/``
    is used as given); a tree that already sits there is adopted in place.

    Raises:
        UsageError: ``tree`` has no ``lib/``, or the variant exists and ``force`` is not set.
    """
    tree = Path(os.path.expanduser(tree)).absolute()
    if not (tree / "lib").is_dir():
        raise UsageError(
            f"{tree} is not a libtorch tree (no lib/)", hint="pass the libtorch directory"
        )
    chosen = name or tree.name
    full = chosen if "/" in chosen else f"precompiled/{chosen}"
    existing = variants.variant_dir(context, full)
    in_place = existing.resolve() == tree.resolve()  # adopted where it lies, nothing replaced
    if existing.exists() and not in_place and not force:
        raise UsageError(f"{variants.validate_name(full)} is already installed", hint=REPLACE_HINT)
    info = variants.VariantInfo(name=full, source={"kind": "directory", "directory": str(tree)})
    return register_variant(
        context, full, tree, info, activate=activate, move=False, force=force, on_wait=on_wait
    )


def register_variant(
    context: Context,
    name: str,
    tree: Path,
    info: variants.VariantInfo,
    *,
    activate: bool = True,
    move: bool = True,
    force: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> InstallResult:
    """Add a libtorch tree made elsewhere (a source build, ``install --from-dir``) as
    variant ``name``.

    The tree (``lib/``, ``include/``, ``share/``) is moved (or copied) into the layout under
    the variant's lock; the archs are read from its binaries and written to
    ``variant.json`` / ``.arch`` next to what ``info`` says (torch, cuda, archs_requested,
    source). Run :func:`fdl.libtorch.verify_variant` afterwards to compare them. A source
    build's tree (``source={"kind": "build"}``) is a :class:`FromBuild`, any other a
    :class:`FromDirectory`.

    Args:
        context: The libtorch root.
        name: ``builds/sm61-sm120``.
        tree: The finished tree.
        info: What the builder knows (``source={"kind": "build", ...}``).
        activate: Make it the active variant.
        move: Move ``tree`` (same file system: a rename) instead of copying it.
        force: Replace a target fdl did not make (never one that holds ``tree``).
        on_wait: Told who holds the variant's lock when this call has to wait for it.

    Raises:
        UsageError: the variant would land inside ``tree`` (copying it into itself), or the
            target holds something fdl did not make.
    """
    check_tree(tree)
    target = resolve_target(context, name)
    source, destination = real_path(tree), real_path(target.path)
    if source == destination:
        return _adopt_in_place(context, target, info, activate)
    if path_contains(source, destination) or path_contains(source, real_path(context.libtorch_dir)):
        aside = tree.with_name(f"{tree.name}-tree")
        raise UsageError(
            f"{tree} holds fdl's libtorch root ({context.libtorch_dir}): installing it as "
            f"{target.name} would copy it into itself",
            hint=f"move it aside first, then install it: mv {tree} {aside} && "
            f"fdl libtorch install --from-dir {aside}",
        )
    made = (
        FromBuild(tree, info, move)
        if info.source.get("kind") == "build"
        else FromDirectory(tree, info, move)
    )
    return install_source(
        context,
        made,
        target=target,
        activate=activate,
        force=force,
        protected=protected_paths(context, ("the tree being installed", tree)),
        on_wait=on_wait,
    )


def _adopt_in_place(
    context: Context, target: Target, info: variants.VariantInfo, activate: bool
) -> InstallResult:
    """Register a tree that already sits where the variant goes: write its metadata there,
    move nothing."""
    with variant_lock(target):
        info.name = target.name or target.path.name
        info.installed_at = variants.now_iso()
        variants.write_info(target.path, finish_info(target.path, info))
    return InstallResult(target, info, True, activate_target(context, target, activate))
