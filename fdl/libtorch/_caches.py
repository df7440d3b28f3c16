"""What fdl keeps to go faster, how big it is, and removing it (``fdl cache``).

Only fdl's own caches are listed and removed: directories under fdl's cache directory
and the ``.build-cache`` of the libtorch root, and the images fdl names ``fdl-libtorch*``
that carry its owner labels for this project (or, asked, for this user): on an engine
several users or projects share, the others' images are theirs.
A directory is deleted only when it holds the ``CACHEDIR.TAG`` fdl writes when it makes
it (:func:`fdl.paths.own_cache_dir`), or is empty. Variants are not caches (``fdl
libtorch remove`` deletes those).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fdl._files import tree_size
from fdl.engine import Engine
from fdl.errors import FdlError, UsageError
from fdl.paths import (
    CACHE_TAG,
    PROJECT_LABEL,
    USER_LABEL,
    Context,
    cache_dir,
    current_user,
    is_own_cache,
)

__all__ = [
    "CACHES",
    "CacheEntry",
    "ImageOwner",
    "check_cleanable",
    "clean_caches",
    "list_caches",
]

# name -> (where under fdl's cache directory, what it is)
_DIRECTORIES = {
    "downloads": ("libtorch", "official libtorch zips (partial downloads; --keep-archive)"),
    "wheels": (
        "wheels",
        "PyTorch wheels pip downloaded for `fdl libtorch install --from-wheel`, and the byte "
        "ranges CPU views read (ranges/)",
    ),
    "compiler": ("compiler", "ccache/sccache storage of native source builds"),
    "smoke": ("smoke", "build trees of `fdl libtorch verify --cmake`"),
    "registry": ("registry", "blobs of interrupted `fdl libtorch pull`s (resumed by the next)"),
    "crates": ("crates", "crates the host's cargo vendored for `toolchain: host` image builds"),
    "manifests": (
        "manifest",
        "parsed manifests, so an unchanged fdl.yml is read without the YAML parser "
        "(at most 256 small files)",
    ),
    "tables": (
        "tables",
        "parsed compatibility tables, so a command that needs one reads it without the "
        "YAML parser (one small file per table)",
    ),
    "compose": (
        "compose",
        "what fdl reads of compose files (services' images, working directories, volumes), "
        "so a docker: command reads an unchanged file without the YAML parser (at most 64)",
    ),
    "engine": (
        "engine-probes",
        "what fdl learned by asking docker (its client, buildx, compose), so a docker: "
        "command calls docker once (at most 32 small files)",
    ),
    "plans": (
        "plans",
        "project commands' plans and config show|explain's answers, with the signatures of "
        "what made them, so an unchanged command runs without planning (at most 64)",
    ),
}
IMAGES = "fdl-libtorch*"
_KEYED = re.compile(r"-[0-9a-f]{16}$")  # a shared image's content key (not a project's name)
CACHES = (*_DIRECTORIES, "builds", "images")


@dataclass(frozen=True)
class ImageOwner:
    """Whose ``fdl-libtorch*`` images are listed and cleaned.

    Attributes:
        project_dir: This project's directory (None outside a project).
        project: Its name, as in its stable image names (``fdl-libtorch:<project>-...``).
        every_project: Every image this user made (source-build builders included).

    An image counts only with fdl's user label of this user; outside a project and
    without ``every_project`` nothing does.
    """

    project_dir: Path | None = None
    project: str | None = None
    every_project: bool = False

    def owns(self, ref: str, labels: Mapping[str, str]) -> bool:
        """Whether ``ref`` (with its image's labels) is this owner's."""
        if labels.get(USER_LABEL) != current_user():
            return False  # another user's, or made before fdl labelled its images
        if self.every_project:
            return True
        if self.project_dir is not None and labels.get(PROJECT_LABEL) == str(
            self.project_dir.resolve()
        ):
            return True
        # The project's own stable names point at a shared (content-keyed) image.
        stable = self.project is not None and ref.startswith(f"{IMAGES[:-1]}:{self.project}-")
        return stable and _KEYED.search(ref) is None


@dataclass(frozen=True)
class CacheEntry:
    """One cache: where it is, what it holds, how many bytes deleting it frees."""

    name: str
    description: str
    size: int
    path: Path | None = None
    images: tuple[str, ...] = field(default_factory=tuple)

    @property
    def owned(self) -> bool:
        """Whether fdl may delete the directory: it holds fdl's cache tag, is empty or is
        not there."""
        path = self.path
        if path is None or not path.exists() or is_own_cache(path):
            return True
        try:
            return path.is_dir() and not any(path.iterdir())
        except OSError:
            return False

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "bytes": self.size,
            "path": str(self.path) if self.path else None,
            "images": list(self.images),
            "owned": self.owned,
        }


def list_caches(
    context: Context,
    environ: Mapping[str, str],
    *,
    engine: Engine | None = None,
    owner: ImageOwner | None = None,
) -> list[CacheEntry]:
    """Every cache of fdl's, with its size (images only when an engine answers: those
    of ``owner``, by their labels; none without an owner)."""
    root = cache_dir(environ)
    entries = []
    for name, (relative, description) in _DIRECTORIES.items():
        path = root / relative
        entries.append(CacheEntry(name, description, tree_size(path) if path.exists() else 0, path))
    builds = context.libtorch_dir / ".build-cache"
    entries.append(
        CacheEntry(
            "builds",
            "source checkouts, build venvs and CMake trees of `fdl libtorch build` "
            "(interrupted builds resume from them)",
            tree_size(builds) if builds.exists() else 0,
            builds,
        )
    )
    if engine is not None:
        owner = owner or ImageOwner()
        try:
            refs_list, sizes = [], {}
            for ref in engine.list_images(IMAGES):
                info = engine.inspect_image(ref)
                if owner.owns(ref, info.labels):
                    refs_list.append(ref)
                    sizes[info.id] = info.size
            refs, size = tuple(refs_list), sum(sizes.values())
        except FdlError:
            refs, size = (), 0
        whose = "this user's, every project" if owner.every_project else "this project's"
        entries.append(
            CacheEntry(
                "images",
                f"libtorch images fdl made for training images (fdl-libtorch:*) and its "
                f"builder images ({whose}); rebuilt when needed",
                size,
                images=refs,
            )
        )
    return entries


def check_cleanable(entries: Sequence[CacheEntry]) -> None:
    """Refuse, before anything is deleted, a cache directory fdl cannot tell it made.

    Raises:
        UsageError: naming each such directory, with the fix.
    """
    foreign = [entry for entry in entries if not entry.owned]
    if not foreign:
        return
    shown = ", ".join(f"{entry.name} ({entry.path})" for entry in foreign)
    raise UsageError(
        f"fdl did not make {shown}: it has no {CACHE_TAG} of fdl's, and fdl deletes only "
        "the caches it made",
        hint="check FDL_CACHE_DIR (it may point at a directory of yours); if it is a cache "
        "you want gone, delete it yourself, or leave that cache out of the names",
    )


def clean_caches(
    entries: Sequence[CacheEntry], names: Sequence[str], *, engine: Engine | None = None
) -> list[CacheEntry]:
    """Remove the caches called ``names`` (all when empty); return those removed.

    Raises:
        UsageError: a name that is not a cache, or a directory fdl did not make (see
            :func:`check_cleanable`; nothing is deleted then).
    """
    unknown = [n for n in names if n not in CACHES]
    if unknown:
        raise UsageError(f"no cache called {unknown[0]!r}", hint=f"caches: {', '.join(CACHES)}")
    check_cleanable([entry for entry in entries if not names or entry.name in names])
    removed = []
    for entry in entries:
        if names and entry.name not in names:
            continue
        if entry.path is not None and entry.path.exists():
            _remove_cache_dir(entry.path)
        if engine is not None:
            for ref in entry.images:
                engine.remove_image(ref)
        removed.append(entry)
    return removed


def _remove_cache_dir(path: Path) -> None:
    """Delete a cache directory, its ``CACHEDIR.TAG`` last: a clean stopped half-way
    (Ctrl-C, a full disk) leaves the tag, so the next clean still knows the rest is fdl's."""
    tag = path / CACHE_TAG
    for child in sorted(path.iterdir()):
        if child == tag:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    tag.unlink(missing_ok=True)
    path.rmdir()
