"""Putting a libtorch tree in place: staging directory, lock, metadata, atomic rename.

Every install (download, wheel, source build) goes through :func:`install_tree`:

1. take the variant's lock (``libtorch/.locks/<kind>-<name>.lock``), so two runs cannot
   write the same variant;
2. under the lock, decide again whether the variant is already there (a concurrent run may
   have installed it while this one waited);
3. let the caller fill a fresh staging directory beside the target (same file system);
4. read the binaries (archs, ABI), write ``variant.json`` and ``.arch``;
5. rename the staging directory to the target (swapping out an older one), then activate.

A crash at any point leaves either the old variant or the new one, never a mix; leftovers
(``.<name>.staging-*``) are removed by the next install of that variant.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fdl.compat import archive_layout
from fdl.errors import EnvironmentProblem
from fdl.libtorch import variants
from fdl.libtorch._scan import detect_abi, read_build_version, scan_device_code
from fdl.paths import Context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.locking import FileLock

__all__ = [
    "InstallResult",
    "Populate",
    "Target",
    "check_tree",
    "finish_info",
    "install_tree",
    "installed_build_version",
    "register_variant",
    "resolve_target",
    "variant_lock",
]

Populate = Callable[[Path], variants.VariantInfo]
"""Fills the given (not yet existing) directory with a libtorch tree; returns its metadata."""


@dataclass(frozen=True)
class Target:
    """Where a variant goes.

    Attributes:
        path: The variant directory.
        name: ``precompiled/cu130`` when it lives in the layout, None for ``--path`` elsewhere.
        lock: The lock file guarding it.
    """

    path: Path
    name: str | None
    lock: Path


@dataclass(frozen=True)
class InstallResult:
    """What an install did.

    Attributes:
        target: Where the variant is.
        info: Its metadata (as written, or as found when it was already installed).
        installed: False when an up-to-date variant was already there.
        activated: True when ``.active`` now points at it.
        replaced: The torch version of the variant it replaced, if any.
    """

    target: Target
    info: variants.VariantInfo
    installed: bool
    activated: bool
    replaced: str | None = None


def resolve_target(context: Context, name: str, path: Path | None = None) -> Target:
    """The target for variant ``name``, or for an explicit ``path``.

    A ``path`` inside the layout (``<root>/libtorch/precompiled/x``) is that variant; any
    other path is installed there but cannot be activated (``.active`` only names variants
    under the root).
    """
    normalised = variants.validate_name(name)
    if path is None:
        directory = context.libtorch_dir / normalised
        return Target(directory, normalised, variants.lock_file(context, normalised))
    directory = path.expanduser().absolute()
    for kind in variants.KINDS:
        base = (context.libtorch_dir / kind).absolute()
        if directory.parent == base:
            inside = f"{kind}/{directory.name}"
            checked = variants.validate_name(inside)
            return Target(directory, checked, variants.lock_file(context, checked))
    return Target(directory, None, directory.parent / f".{directory.name}.lock")


def check_tree(tree: Path) -> None:
    """Raise when ``tree`` is not a libtorch tree (no ``lib/libtorch.so``)."""
    library = tree / archive_layout().library
    if not library.is_file():
        present = ", ".join(sorted(p.name for p in tree.iterdir())) if tree.is_dir() else "nothing"
        raise EnvironmentProblem(
            f"no {archive_layout().library} in the libtorch tree (it holds: {present})",
            hint="the archive or wheel does not have the expected layout; "
            "check that it is a libtorch (lib/, include/, share/)",
        )


def finish_info(tree: Path, info: variants.VariantInfo) -> variants.VariantInfo:
    """Complete ``info`` from the tree itself: archs found in the binaries, ABI, version."""
    scan = scan_device_code(tree)
    info.archs_found = scan.archs_found() if scan.has_device_code else {"cubin": [], "ptx": []}
    if info.abi is None:
        info.abi = detect_abi(tree)
    if info.torch is None:
        version = read_build_version(tree)
        info.torch = version.split("+", 1)[0] if version else None
    if scan.errors:
        info.extra["unreadable_libraries"] = [f"{n}: {why}" for n, why in scan.errors]
    return info


def installed_build_version(path: Path) -> str | None:
    """What the variant at ``path`` is (``2.14.1+cu130``): its ``build-version`` file, else
    its metadata."""
    found = read_build_version(path)
    if found:
        return found
    info = variants.read_info(path, path.name)
    recorded = info.source.get("build_version")
    return str(recorded) if recorded else None


def _remove_leftovers(target: Path) -> None:
    """Staging and swapped-out directories a crashed run left (call under the lock)."""
    if not target.parent.is_dir():
        return
    prefixes = (f".{target.name}.staging-", f".{target.name}.old-")
    for child in target.parent.iterdir():
        if child.name.startswith(prefixes) and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)


def _publish(tree: Path, target: Path) -> bool:
    """Rename ``tree`` to ``target``; returns True when an older target was swapped out."""
    if not target.exists():
        os.rename(tree, target)
        return False
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, old / "content")
    try:
        os.rename(tree, target)
    except OSError:
        os.rename(old / "content", target)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return True


def variant_lock(
    target: Target,
    *,
    purpose: str = "",
    on_wait: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> FileLock:
    """The lock guarding ``target`` (use it as a context manager)."""
    from fdl.locking import FileLock

    what = purpose or f"installing libtorch {target.name or target.path}"
    return FileLock(target.lock, timeout=timeout, purpose=what, on_wait=on_wait)


def install_tree(
    context: Context,
    target: Target,
    populate: Populate,
    *,
    is_current: Callable[[Path], bool] | None = None,
    activate: bool = True,
    on_wait: Callable[[str], None] | None = None,
    lock_timeout: float | None = None,
    locked: bool = False,
) -> InstallResult:
    """Install a tree at ``target`` atomically, under the variant's lock.

    Args:
        context: The libtorch root.
        target: From :func:`resolve_target`.
        populate: Fills the staging tree and returns the metadata it knows.
        is_current: Given the installed variant's directory, True when it already is what
            is being installed (then nothing is written). None: always (re)install.
        activate: Point ``.active`` at the variant (only for variants in the layout).
        on_wait: Told when another process holds the lock.
        lock_timeout: Seconds to wait for the lock (None: as long as it takes).
        locked: The caller already holds :func:`variant_lock` (for longer work, such as
            a download, that must not run twice at once).
    """
    if locked:
        return _install_locked(context, target, populate, is_current, activate)
    with variant_lock(target, on_wait=on_wait, timeout=lock_timeout):
        return _install_locked(context, target, populate, is_current, activate)


def _install_locked(
    context: Context,
    target: Target,
    populate: Populate,
    is_current: Callable[[Path], bool] | None,
    activate: bool,
) -> InstallResult:
    _remove_leftovers(target.path)
    name = target.name or target.path.name
    if (target.path / "lib").is_dir() and is_current is not None and is_current(target.path):
        existing = variants.read_info(target.path, name)
        return InstallResult(target, existing, False, _activate(context, target, activate))
    previous = _previous_version(target.path, name)
    target.path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.staging-", dir=target.path.parent))
    try:
        tree = staging / "tree"
        info = populate(tree)
        check_tree(tree)
        info.name = name
        info.installed_at = variants.now_iso()
        variants.write_info(tree, finish_info(tree, info))
        _publish(tree, target.path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return InstallResult(target, info, True, _activate(context, target, activate), previous)


def _previous_version(path: Path, name: str) -> str | None:
    if not path.is_dir():
        return None
    return variants.read_info(path, name).torch or "unknown"


def _activate(context: Context, target: Target, wanted: bool) -> bool:
    if not wanted or target.name is None:
        return False
    variants.activate(context, target.name)
    return True


def register_variant(
    context: Context,
    name: str,
    tree: Path,
    info: variants.VariantInfo,
    *,
    activate: bool = True,
    move: bool = True,
) -> InstallResult:
    """Add a libtorch tree made elsewhere (a source build) as variant ``name``.

    The tree (``lib/``, ``include/``, ``share/``) is moved (or copied) into the layout under
    the variant's lock; the archs are read from its binaries and written to
    ``variant.json`` / ``.arch`` next to what ``info`` says (torch, cuda, archs_requested,
    source). Run :func:`fdl.libtorch.verify_variant` afterwards to compare them.

    Args:
        context: The libtorch root.
        name: ``builds/sm61-sm120``.
        tree: The finished tree.
        info: What the builder knows (``source={"kind": "build", ...}``).
        activate: Make it the active variant.
        move: Move ``tree`` (same file system: a rename) instead of copying it.
    """
    check_tree(tree)

    def populate(staging: Path) -> variants.VariantInfo:
        if move:
            shutil.move(str(tree), str(staging))
        else:
            shutil.copytree(tree, staging, symlinks=True)
        return info

    return install_tree(context, resolve_target(context, name), populate, activate=activate)
