"""Putting a libtorch tree in place: staging directory, lock, metadata, atomic rename.

Every install goes through :func:`install_tree`, each source's
(:func:`fdl.libtorch.sources.install_source`: download, wheel, CPU view, registry, source
build, directory):

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

import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.compat import archive_layout
from fdl.errors import EnvironmentProblem, UsageError
from fdl.libtorch import variants
from fdl.libtorch._scan import detect_abi, detect_cuda, read_build_version, scan_device_code
from fdl.locking import FileLock
from fdl.paths import Context

__all__ = [
    "InstallResult",
    "Populate",
    "Target",
    "activate_target",
    "check_replaceable",
    "check_tree",
    "finish_info",
    "install_tree",
    "installed_build_version",
    "path_contains",
    "protected_paths",
    "real_path",
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

    def to_json(self) -> dict[str, Any]:
        """For ``--json``: where, whether new, whether active, then the metadata."""
        return {
            "variant": self.target.name,
            "path": str(self.target.path),
            "installed": self.installed,
            "activated": self.activated,
            "replaced": self.replaced,
            **self.info.to_json(),
        }


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
    directory = Path(os.path.expanduser(path)).absolute()
    for kind in variants.KINDS:
        base = (context.libtorch_dir / kind).absolute()
        if directory.parent == base:
            inside = f"{kind}/{directory.name}"
            checked = variants.validate_name(inside)
            return Target(directory, checked, variants.lock_file(context, checked))
    # The lock of a directory outside the layout lives with fdl's own locks, not beside it
    # in the user's directory.
    digest = hashlib.sha256(str(directory).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    lock = context.libtorch_dir / ".locks" / f"path-{digest}.lock"
    return Target(directory, None, lock)


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


def _made_by_fdl(path: Path) -> bool:
    """True for a variant directory fdl wrote (its ``variant.json``), or the reference CLI's
    (``.arch`` beside ``lib/``)."""
    if (path / variants.INFO_FILE).is_file():
        return True
    return (path / ".arch").is_file() and (path / "lib").is_dir()


def path_contains(outer: Path, inner: Path) -> bool:
    """True when ``inner`` is ``outer`` or lies inside it."""
    return outer == inner or outer in inner.parents


def real_path(path: Path) -> Path:
    """``path`` with every symbolic link resolved."""
    return Path(os.path.realpath(path))


def _listing(path: Path, limit: int = 5) -> str:
    try:
        names = sorted(child.name for child in path.iterdir())
    except OSError:
        return "unreadable"
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def protected_paths(context: Context, *extra: tuple[str, Path]) -> list[tuple[str, Path]]:
    """What an install never replaces, not even with ``--force``: the working directory, the
    project (or fdl's home), the libtorch root, the home directory, ``/`` and ``extra``."""
    found = [
        ("the working directory", Path.cwd()),
        ("the project" if context.project else "fdl's home", context.root),
        ("the libtorch root", context.libtorch_dir),
        ("your home directory", Path.home()),
        ("the file system root", Path("/")),
        *extra,
    ]
    return [(what, real_path(path)) for what, path in found]


def check_replaceable(target: Path, *, force: bool, protected: list[tuple[str, Path]]) -> None:
    """Refuse to replace what fdl did not make.

    A target may be replaced when it does not exist, is an empty directory or is a variant
    fdl made. Anything else needs ``force``; and a target that is or contains one of
    ``protected`` (the project, the working directory, the tree being installed) is refused
    even then.

    Raises:
        UsageError: with the fix (another path, or ``--force``).
    """
    if not (target.exists() or target.is_symlink()):
        return
    real = real_path(target) if not target.is_symlink() else real_path(target.parent) / target.name
    special = _special_kind(target)
    if special is not None:
        raise _never_replaced(target, f"is {special}")
    for what, path in protected:
        if path_contains(real, path):
            relation = "is" if real == path else "contains"
            raise UsageError(
                f"{target} {relation} {what} ({path}); fdl never replaces it, "
                "not even with --force",
                hint="install into a new or empty directory (--path DIR), or leave out --path "
                "to install into the project's libtorch/ layout",
            )
    if target.is_dir() and not target.is_symlink():
        if not any(target.iterdir()) or _made_by_fdl(target):
            return
        held = f"it holds {_listing(target)}"
    else:
        held = "it is a symbolic link" if target.is_symlink() else "it is a file"
    if force:
        if real.parent == real.parent.parent:  # /usr, /etc, /opt: not even with --force
            raise _never_replaced(target, f"is a top-level directory of the system ({held})")
        return
    raise UsageError(
        f"{target} is not a libtorch variant fdl installed ({held}); "
        "fdl only replaces what it made",
        hint="choose a new or empty directory (--path DIR), "
        "or pass --force if replacing it is what you mean",
    )


def _never_replaced(target: Path, what: str) -> UsageError:
    return UsageError(
        f"{target} {what}; fdl never replaces it, not even with --force",
        hint="install into a new or empty directory (--path DIR), or leave out --path "
        "to install into the project's libtorch/ layout",
    )


def _special_kind(target: Path) -> str | None:
    """What ``target`` is when it is neither a directory, a regular file nor a symbolic
    link (a device, a FIFO, a socket): nothing an install may stand in for."""
    try:
        mode = target.lstat().st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def finish_info(tree: Path, info: variants.VariantInfo) -> variants.VariantInfo:
    """Complete ``info`` from the tree itself: archs found in the binaries, ABI, version."""
    scan = scan_device_code(tree)
    info.archs_found = scan.archs_found() if scan.has_device_code else {"cubin": [], "ptx": []}
    if info.abi is None:
        info.abi = detect_abi(tree)
    if info.torch is None:
        version = read_build_version(tree)
        info.torch = version.split("+", 1)[0] if version else None
    if info.cuda is None:  # what the variant is comes from its binaries
        info.cuda, how = detect_cuda(tree, scan)
        if info.cuda is None and scan.has_device_code:
            info.extra["cuda_unknown"] = how
    if scan.errors:
        info.extra["unreadable_libraries"] = [f"{n}: {why}" for n, why in scan.errors]
    _find_rocm(tree, info)
    return info


def _find_rocm(tree: Path, info: variants.VariantInfo) -> None:
    """An AMD build: the gfx targets of ``lib/libtorch_hip.so``'s offload bundles, and its
    ROCm release from the build version (``2.10.0+rocm7.0``)."""
    from fdl.binaries import BinaryFormatError, read_offload_code

    library = tree / "lib" / "libtorch_hip.so"
    if not library.is_file() or library.is_symlink():
        return
    try:
        info.archs_found["gfx"] = list(read_offload_code(library).archs)
    except (BinaryFormatError, OSError) as exc:
        info.extra.setdefault("unreadable_libraries", []).append(f"libtorch_hip.so: {exc}")
    version = read_build_version(tree) or ""
    _, _, local = version.partition("+")
    if local.startswith("rocm") and local[4:].replace(".", "").isdigit():
        info.extra["rocm"] = local[4:]


def installed_build_version(path: Path) -> str | None:
    """What the variant at ``path`` is (``2.14.1+cu130``): its ``build-version`` file, else
    its metadata."""
    found = read_build_version(path)
    if found:
        return found
    info = variants.read_info(path, path.name)
    recorded = info.source.get("build_version")
    return str(recorded) if recorded else None


def variant_lock(
    target: Target,
    *,
    purpose: str = "",
    on_wait: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> FileLock:
    """The lock guarding ``target`` (use it as a context manager)."""
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
    force: bool = False,
    protected: list[tuple[str, Path]] | None = None,
) -> InstallResult:
    """Install a tree at ``target`` atomically, under the variant's lock.

    An existing target is replaced only when fdl made it (see :func:`check_replaceable`).

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
        force: Replace a target fdl did not make (never a protected one).
        protected: What is never replaced (default: :func:`protected_paths`).

    Raises:
        UsageError: the target holds something fdl did not make.
    """
    keep = protected_paths(context) if protected is None else protected
    if locked:
        return _install_locked(context, target, populate, is_current, activate, force, keep)
    with variant_lock(target, on_wait=on_wait, timeout=lock_timeout):
        return _install_locked(context, target, populate, is_current, activate, force, keep)


def _install_locked(
    context: Context,
    target: Target,
    populate: Populate,
    is_current: Callable[[Path], bool] | None,
    activate: bool,
    force: bool,
    protected: list[tuple[str, Path]],
) -> InstallResult:
    name = target.name or target.path.name
    if (target.path / "lib").is_dir() and is_current is not None and is_current(target.path):
        existing = variants.read_info(target.path, name)
        return InstallResult(target, existing, False, activate_target(context, target, activate))
    from fdl.archive import make_staging, publish, remove_stale_staging

    check_replaceable(target.path, force=force, protected=protected)
    remove_stale_staging(target.path)  # what a crashed run left (we hold the lock)
    previous = _previous_version(target.path, name)
    staging = make_staging(target.path)
    try:
        tree = staging / "tree"
        info = populate(tree)
        check_tree(tree)
        info.name = name
        info.installed_at = variants.now_iso()
        variants.write_info(tree, finish_info(tree, info))
        publish(tree, target.path, replace=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return InstallResult(target, info, True, activate_target(context, target, activate), previous)


def _previous_version(path: Path, name: str) -> str | None:
    if not path.is_dir():
        return None
    return variants.read_info(path, name).torch or "unknown"


def activate_target(context: Context, target: Target, wanted: bool) -> bool:
    """Point ``.active`` at ``target`` when ``wanted`` and it is in the layout; whether it did."""
    if not wanted or target.name is None:
        return False
    variants.activate(context, target.name)
    return True
