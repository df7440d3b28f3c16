"""The shared libraries a program loads: its ELF dependency closure.

Resolution follows the dynamic loader (``ld.so``): for each DT_NEEDED name, DT_RPATH of the
object and its loaders (only when the object has no DT_RUNPATH), then the given search
directories (what LD_LIBRARY_PATH would be), then the object's DT_RUNPATH, then
``/etc/ld.so.conf`` directories and the system directories. ``$ORIGIN`` / ``${ORIGIN}``
expand to the directory of the object that names them.

With ``root`` the closure is computed inside an unpacked file system (an image's rootfs):
absolute directories are looked up below it.
"""

from __future__ import annotations

import fnmatch
import glob
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fdl.binaries.elf import BinaryFormatError, DynamicInfo, is_elf, read_dynamic

__all__ = ["SYSTEM_DIRS", "Closure", "dependency_closure", "ld_so_conf_dirs"]

SYSTEM_DIRS: tuple[str, ...] = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)


@dataclass(frozen=True)
class Closure:
    """The libraries a program needs, as resolved.

    Attributes:
        program: The starting file.
        found: (name, path) of each resolved library, in discovery (breadth-first) order.
        missing: (name, needed by) for each library that was not found.
        skipped: Names not searched for (``skip``, e.g. glibc or the injected libcuda).
    """

    program: Path
    found: tuple[tuple[str, Path], ...] = ()
    missing: tuple[tuple[str, str], ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing

    @property
    def paths(self) -> list[Path]:
        return [path for _, path in self.found]


@dataclass
class _Node:
    path: Path
    info: DynamicInfo
    rpath_chain: list[Path] = field(default_factory=list)


def ld_so_conf_dirs(root: Path | None = None) -> list[str]:
    """Directories listed in ``/etc/ld.so.conf`` (following ``include`` lines)."""
    base = root or Path("/")
    result: list[str] = []
    pending = [base / "etc/ld.so.conf"]
    seen: set[Path] = set()
    while pending:
        conf = pending.pop(0)
        if conf in seen or not conf.is_file():
            continue
        seen.add(conf)
        for line in conf.read_text(encoding="utf-8", errors="replace").splitlines():
            text = line.split("#", 1)[0].strip()
            if text.startswith("include "):
                pattern = text.split(None, 1)[1]
                full = str(base / pattern.lstrip("/"))
                pending += sorted(Path(p) for p in glob.glob(full))
            elif text:
                result.append(text)
    return result


def _expand(entry: str, origin: Path, root: Path | None) -> Path:
    if "$ORIGIN" in entry or "${ORIGIN}" in entry:
        return Path(entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin)))
    return _rooted(entry, root) if entry.startswith("/") else Path(entry)


def _rooted(directory: str, root: Path | None) -> Path:
    return root / directory.lstrip("/") if root is not None else Path(directory)


def dependency_closure(
    program: Path | str,
    search_dirs: Sequence[Path | str] = (),
    *,
    also_load: Iterable[str] = (),
    skip: Collection[str] = (),
    root: Path | str | None = None,
    system_dirs: Sequence[str] | None = None,
) -> Closure:
    """Resolve every library ``program`` loads, directly or indirectly.

    Args:
        program: The executable or library to start from.
        search_dirs: Searched like LD_LIBRARY_PATH (after RPATH, before RUNPATH).
        also_load: Names loaded with dlopen at run time (shell globs allowed, e.g.
            ``libnvrtc-builtins.so.13.*``); they and their dependencies join the closure.
        skip: Names not to resolve (glibc parts provided by the base image, libcuda.so.1).
        root: Resolve inside this unpacked file system instead of ``/``.
        system_dirs: The loader's default directories; by default the ``/etc/ld.so.conf``
            directories (below ``root``) followed by :data:`SYSTEM_DIRS`.

    Raises:
        BinaryFormatError: ``program`` itself is not a readable ELF file.
    """
    rooted = Path(root) if root is not None else None
    start = Path(program)
    first = _Node(start, read_dynamic(start))
    first.rpath_chain = _rpaths(first, [], rooted)
    defaults = [*ld_so_conf_dirs(rooted), *SYSTEM_DIRS] if system_dirs is None else system_dirs
    late = [_rooted(d, rooted) for d in defaults]
    early = [Path(d) for d in search_dirs]
    found: dict[str, Path] = {}
    missing: list[tuple[str, str]] = []
    skipped: list[str] = []
    queue: deque[tuple[str, _Node]] = deque((name, first) for name in first.info.needed)
    queue += ((pattern, first) for pattern in also_load)
    while queue:
        name, parent = queue.popleft()
        if name in found or name in skipped or any(m[0] == name for m in missing):
            continue
        if name in skip:
            skipped.append(name)
            continue
        dirs = _search_order(parent, early, late, rooted)
        path = _find(name, dirs)
        if path is None:
            missing.append((name, str(parent.path)))
            continue
        found[path.name if _is_pattern(name) else name] = path
        node = _load(path, parent, rooted)
        if node is not None:
            queue += ((dep, node) for dep in node.info.needed)
    return Closure(start, tuple(found.items()), tuple(missing), tuple(skipped))


def _rpaths(node: _Node, inherited: list[Path], root: Path | None) -> list[Path]:
    if node.info.runpath:
        return []  # DT_RUNPATH disables DT_RPATH for this object and what it loads
    own = [_expand(e, node.path.parent, root) for e in node.info.rpath]
    return own + inherited


def _search_order(
    node: _Node, early: list[Path], late: list[Path], root: Path | None
) -> list[Path]:
    runpath = [_expand(e, node.path.parent, root) for e in node.info.runpath]
    return [*node.rpath_chain, *early, *runpath, *late]


def _is_pattern(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def _find(name: str, dirs: list[Path]) -> Path | None:
    if "/" in name:
        path = Path(name)
        return path if is_elf(path) else None
    for directory in dirs:
        if _is_pattern(name):
            if not directory.is_dir():
                continue
            for candidate in sorted(directory.iterdir()):
                if fnmatch.fnmatchcase(candidate.name, name) and is_elf(candidate):
                    return candidate
            continue
        candidate = directory / name
        if is_elf(candidate):
            return candidate
    return None


def _load(path: Path, parent: _Node, root: Path | None) -> _Node | None:
    try:
        info = read_dynamic(path)
    except BinaryFormatError:
        return None  # a damaged dependency is reported by whoever loads it, not here
    node = _Node(path, info)
    node.rpath_chain = _rpaths(node, parent.rpath_chain, root)
    return node
