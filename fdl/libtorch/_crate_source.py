"""A crate's own files, from cargo's registry cache (``$CARGO_HOME/registry``): the
unpacked sources (``src/<registry>/<name>-<version>/``, complete once cargo wrote
``.cargo-ok``) first, else the downloaded ``.crate`` (``cache/<registry>/``), read with
fdl's bounded archive reader. Nothing is written; a file is read only when it is a regular
file (no link is followed) of bounded size.

:func:`fetch_crates` asks cargo itself to download crates it lacks (``cargo fetch`` of a
throw-away manifest in fdl's cache, run from the project's directory so the user's
registry configuration, mirrors and offline mode apply).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fdl.errors import FdlError

__all__ = [
    "CRATE_VERSION",
    "CrateFiles",
    "CrateSourceError",
    "cargo_home",
    "fetch_crates",
    "read_crate_files",
]

# A crate name as Rust's registry allows it, and a final release: nothing else reaches a
# path or a command.
CRATE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
CRATE_VERSION = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")
MAX_FILE = 4 << 20  # the largest of these files (flodl-cli's init.rs) is about 60 KiB


class CrateSourceError(FdlError):
    """A crate's files in cargo's cache cannot be read as a crate (damaged or hostile)."""


@dataclass(frozen=True)
class CrateFiles:
    """Files of one crate release as cargo keeps them.

    Attributes:
        crate: ``torch-sys``.
        version: ``0.26.0``.
        where: The directory or ``.crate`` read.
        texts: Each file found (its path in the crate: ``build.rs``) and its text.
        bytes_read: What was read from disk (the whole ``.crate`` when that was read).
    """

    crate: str
    version: str
    where: Path
    texts: Mapping[str, str]
    bytes_read: int


def cargo_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$CARGO_HOME``, else ``~/.cargo`` (cargo's own rule)."""
    env = os.environ if environ is None else environ
    given = env.get("CARGO_HOME")
    if given:
        return Path(given)
    return Path(env.get("HOME") or Path.home()) / ".cargo"


def _checked(crate: str, version: str) -> None:
    if not CRATE_NAME.fullmatch(crate) or not CRATE_VERSION.fullmatch(version):
        raise CrateSourceError(
            f"{crate[:64]!r} {version[:32]!r} is not a crate name and final release fdl reads",
            hint="name a release as Rust's registry writes it (0.26.0)",
        )


def read_crate_files(
    crate: str, version: str, names: Sequence[str], home: Path
) -> CrateFiles | None:
    """``names`` of ``crate`` ``version`` from cargo's registry cache under ``home``; None
    when cargo holds no copy of it.

    Raises:
        CrateSourceError: the name or version is not one Rust's registry writes, or cargo's
            copy is damaged, hostile (a link, a path out) or over the size read.
    """
    _checked(crate, version)
    base = f"{crate}-{version}"
    for registry in _registries(home / "registry" / "src"):
        found = _from_directory(registry / base, names)
        if found is not None:
            return found
    for registry in _registries(home / "registry" / "cache"):
        archive = registry / f"{base}.crate"
        if os.path.lexists(archive):
            return _from_archive(crate, version, archive, names)
    return None


def _registries(directory: Path) -> list[Path]:
    """The registries cargo keeps under ``directory`` (real directories, crates.io's
    first), none when it is absent or not a directory."""
    try:
        with os.scandir(directory) as listing:
            found = [Path(e.path) for e in listing if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(found, key=lambda p: (not p.name.startswith("index.crates.io-"), p.name))


def _from_directory(directory: Path, names: Sequence[str]) -> CrateFiles | None:
    try:
        info = os.lstat(directory)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not os.path.lexists(directory / ".cargo-ok"):
        return None  # a link, or a copy cargo has not finished unpacking: use the .crate
    crate, _, version = directory.name.rpartition("-")
    texts: dict[str, str] = {}
    read = 0
    for name in names:
        data = _read_inside(directory, name)
        if data is not None:
            texts[name] = _text(directory / name, data)
            read += len(data)
    return CrateFiles(crate, version, directory, texts, read)


def _read_inside(directory: Path, name: str) -> bytes | None:
    """``name`` (``src/init.rs``) below ``directory``, each component opened without
    following a link; None when absent."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    parts = name.split("/")
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_DIRECTORY", 0))
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, flags | getattr(os, "O_DIRECTORY", 0), dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise _refused(directory / name, f"not a directory ({exc.strerror})") from None
            os.close(fd)
            fd = inner
        try:
            handle = os.open(parts[-1], flags, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a link
            raise _refused(directory / name, f"cannot be opened ({exc.strerror})") from None
        with open(handle, "rb") as stream:
            mode = os.fstat(stream.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise _refused(directory / name, "is not a regular file")
            data = stream.read(MAX_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE:
        raise _refused(directory / name, f"is more than {MAX_FILE} bytes")
    return data


def _from_archive(crate: str, version: str, archive: Path, names: Sequence[str]) -> CrateFiles:
    from fdl.archive import ArchiveError, read_tar_members

    base = f"{crate}-{version}"
    try:
        info = os.lstat(archive)
        if not stat.S_ISREG(info.st_mode):
            raise _refused(archive, "is not a regular file (a link?)")
        members = read_tar_members(archive, [f"{base}/{n}" for n in names], max_member=MAX_FILE)
    except ArchiveError as exc:
        raise CrateSourceError(
            f"cargo's copy of {crate} {version} cannot be read: {exc.message}",
            hint=_delete_hint(archive),
        ) from None
    texts = {
        name: _text(archive, members[f"{base}/{name}"])
        for name in names
        if f"{base}/{name}" in members
    }
    return CrateFiles(crate, version, archive, texts, members.bytes_read)


def _text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refused(path, f"is not UTF-8 text (byte {exc.start})") from None


def _refused(path: Path, why: str) -> CrateSourceError:
    return CrateSourceError(f"{path} {why}", hint=_delete_hint(path))


def _delete_hint(path: Path) -> str:
    return (
        f"cargo's copy is damaged or was tampered with: delete {path} and run `cargo fetch` "
        "in the project (cargo downloads it again)"
    )


def fetch_crates(
    wanted: Sequence[tuple[str, str]],
    *,
    project: Path,
    scratch: Path,
    environ: Mapping[str, str] | None = None,
    timeout: float = 600.0,
) -> None:
    """Have cargo download ``wanted`` (crate, version) pairs into its registry cache:
    ``cargo fetch`` of a manifest naming exactly them, written under ``scratch`` (in fdl's
    cache) and run from ``project``, so the configuration cargo reads there (registries,
    source replacement, ``net.offline``) applies.

    Raises:
        CrateSourceError: a name or version outside the grammar, or ``scratch``'s directory
            is not fdl's.
        EnvironmentProblem: cargo is not installed.
        CommandFailed: cargo could not fetch them (offline, no such release).
    """
    import shutil

    from fdl.runner import default_runner, missing_program

    for crate, version in wanted:
        _checked(crate, version)
    runner = default_runner()
    cargo = runner.which("cargo")
    if cargo is None:
        raise missing_program("cargo")
    from fdl.paths import is_own_cache, own_cache_dir

    own_cache_dir(scratch.parent)
    if scratch.parent.is_symlink() or not is_own_cache(scratch.parent):
        raise CrateSourceError(
            f"{scratch.parent} is not a directory fdl made (no CACHEDIR.TAG of fdl's, or a "
            "link): fdl writes the manifest cargo fetches only into its own cache",
            hint=f"remove {scratch.parent} (fdl makes it again), or run `cargo fetch` yourself",
        )
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700)
    try:
        deps = "".join(f'"{crate}" = "={version}"\n' for crate, version in wanted)
        (scratch / "Cargo.toml").write_text(
            '[package]\nname = "fdl-reads-crates"\nversion = "0.0.0"\nedition = "2021"\n'
            'publish = false\n\n[lib]\npath = "lib.rs"\n\n[workspace]\n\n'
            f"[dependencies]\n{deps}",
            encoding="utf-8",
        )
        (scratch / "lib.rs").write_text("", encoding="utf-8")
        env = dict(os.environ if environ is None else environ)
        runner.run(
            [cargo, "fetch", "--manifest-path", str(scratch / "Cargo.toml")],
            cwd=project,
            env=env,
            timeout=timeout,
            max_output=1 << 20,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
