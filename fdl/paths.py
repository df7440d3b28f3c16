"""Where fdl keeps things: the project root, the global home, caches.

- The **libtorch root** is the project directory when fdl runs inside a
  project (a directory with an fdl manifest, or one that already has
  ``libtorch/.active``), else the global home.
- The **global home** is ``$FDL_HOME``, else ``$FLODL_HOME`` (floDl users),
  else the user's data directory (``~/.local/share/fdl`` on Linux).
- The **cache** is ``$FDL_CACHE_DIR``, else the user's cache directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from fdl._upward import EXAMPLE_SUFFIXES, MANIFEST_NAMES, upward

__all__ = ["Context", "cache_dir", "global_home", "owner_labels", "resolve_context"]


def global_home(environ: Mapping[str, str] | None = None) -> Path:
    """The global fdl home (used outside projects)."""
    env = os.environ if environ is None else environ
    for name in ("FDL_HOME", "FLODL_HOME"):
        value = env.get(name)
        if value:
            return _checked_home(name, Path(os.path.expanduser(value)))
    from platformdirs import user_data_dir

    return Path(user_data_dir("fdl", appauthor=False))


def _checked_home(variable: str, home: Path) -> Path:
    """``home`` when it can be fdl's home: a directory, or a path one can create."""
    from fdl.errors import UsageError

    hint = f"point ${variable} at a directory of yours (it is created when missing)"
    raw = os.fsencode(home)
    if len(raw) > 4000 or any(len(part) > 255 for part in raw.split(b"/")):
        raise UsageError(f"${variable} is a path longer than the system allows", hint=hint)
    if home.exists() and not home.is_dir():
        raise UsageError(f"${variable}={home} is not a directory", hint=hint)
    real = home.resolve()
    if any(real == Path(p) or Path(p) in real.parents for p in _PSEUDO_FILE_SYSTEMS):
        raise UsageError(f"${variable}={home} is inside a kernel file system", hint=hint)
    return home


# Where nothing can be created: the kernel's own file systems.
_PSEUDO_FILE_SYSTEMS = ("/proc", "/sys", "/dev")


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache directory (downloads, wheels, build caches)."""
    env = os.environ if environ is None else environ
    value = env.get("FDL_CACHE_DIR")
    if value:
        return Path(os.path.expanduser(value))
    if sys.platform == "linux" and "ANDROID_DATA" not in os.environ:
        # platformdirs' answer in the ordinary cases (an absolute XDG_CACHE_HOME, else an
        # absolute HOME's .cache) without importing it, 9 ms of every command's start;
        # anything unusual is still platformdirs' to decide (tests/unit/test_cache_dir.py)
        xdg, home = os.environ.get("XDG_CACHE_HOME", ""), os.environ.get("HOME", "")
        if xdg.startswith("/"):
            return Path(xdg) / "fdl"
        if not xdg and home.startswith("/"):
            return Path(home) / ".cache" / "fdl"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("fdl", appauthor=False))


# The Cache Directory Tagging Specification (https://bford.info/cachedir/): a directory
# holding this file is a cache; backup tools skip it, and `fdl cache clean` deletes only
# caches that hold it (so a misdirected FDL_CACHE_DIR never costs the user a directory).
# Labels on every image fdl builds for a cache (libtorch images, builders): who made it
# and for which project, so `fdl cache clean images` takes only its own on a shared engine.
USER_LABEL = "dev.fdl.user"
PROJECT_LABEL = "dev.fdl.project"


def current_user() -> str:
    """This user, as the owner label holds it (the uid: names can repeat across hosts)."""
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else os.environ.get("USERNAME", "unknown")


def owner_labels(project_dir: Path | None = None) -> dict[str, str]:
    """The owner labels of an image fdl builds now (for ``project_dir``, if any)."""
    labels = {USER_LABEL: current_user()}
    if project_dir is not None:
        labels[PROJECT_LABEL] = str(project_dir.resolve())
    return labels


CACHE_TAG = "CACHEDIR.TAG"
_CACHE_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
_CACHE_TAG_TEXT = (
    f"{_CACHE_SIGNATURE}\n"
    "# This directory is a cache made by fdl; `fdl cache clean` may delete it.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)


def own_cache_dir(path: Path) -> Path:
    """``path`` as a cache of fdl's: created with a ``CACHEDIR.TAG`` when it does not exist
    yet. A directory that exists is left as it is: fdl cannot tell it made it."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        tag = path / CACHE_TAG
        if not tag.exists():
            tag.write_text(_CACHE_TAG_TEXT, encoding="utf-8")
    return path


def is_own_cache(path: Path) -> bool:
    """Whether ``path`` holds the ``CACHEDIR.TAG`` fdl writes (see :func:`own_cache_dir`)."""
    from fdl._files import read_small_text

    try:
        text = read_small_text(path / CACHE_TAG, limit=4096) or ""
    except OSError:
        return False
    return text.startswith(_CACHE_SIGNATURE) and "fdl" in text


class Context:
    """Where libtorch variants live for this invocation (a value: compared and hashed by
    its fields; a plain class, not a dataclass, which would cost every command's start
    the import of ``dataclasses``).

    Attributes:
        root: The directory holding ``libtorch/``.
        project: True inside a project, False for the global home.
    """

    __slots__ = ("project", "root")

    def __init__(self, root: Path, project: bool) -> None:
        self.root = root
        self.project = project

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return (self.root, self.project) == (other.root, other.project)

    def __hash__(self) -> int:
        return hash((self.root, self.project))

    def __repr__(self) -> str:
        return f"Context(root={self.root!r}, project={self.project!r})"

    @property
    def libtorch_dir(self) -> Path:
        return self.root / "libtorch"

    def label(self) -> str:
        return f"{'project' if self.project else 'global'} ({self.root})"


def find_project_root(start: Path) -> Path | None:
    """The nearest directory (walking up) with an fdl manifest or ``libtorch/.active``."""
    names = [name + suffix for name in MANIFEST_NAMES for suffix in ("", *EXAMPLE_SUFFIXES)]
    for directory in upward(start):
        if any((directory / name).is_file() for name in names):
            return directory
        if (directory / "libtorch" / ".active").is_file():
            return directory
    return None


def resolve_context(start: Path | None = None, environ: Mapping[str, str] | None = None) -> Context:
    """The libtorch context for ``start`` (default: the working directory)."""
    root = find_project_root(start or Path.cwd())
    if root is not None:
        return Context(root, True)
    return Context(global_home(environ), False)
