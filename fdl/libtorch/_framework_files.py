"""Reading the project's framework from its files (``Cargo.lock``, ``Cargo.toml`` and its
workspace, ``CMakeLists.txt``): :func:`detect_framework` gives a :class:`FrameworkPin` per
framework found, each fact located at its file:line:col.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from fdl.errors import Location, ManifestError, UsageError

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

    from fdl.compat import FrameworkRelease, UnknownFrameworkRelease

# fdl.compat (its tables and the modules answering over them) is imported by the functions
# that read a framework's release: a project without Cargo or CMake files never loads it,
# and a project command starts sooner.

__all__ = ["CHECK_KEY", "FrameworkPin", "detect_framework"]

CHECK_KEY = "libtorch.framework-check"
_LIMIT = 4 << 20  # a Cargo.lock of a large workspace is a few hundred KiB
_CMAKE = "libtorch C++ (CMake)"
_MAX_MEMBERS = 1000


@dataclass(frozen=True)
class FrameworkPin:
    """What the project's framework needs of libtorch.

    Attributes:
        framework: ``flodl``, ``tch`` or ``cmake``.
        title: ``floDl``, ``tch-rs``, ``libtorch C++ (CMake)``.
        release: The framework's release (``0.5.3``); None for a CMake project.
        torch: The torch release it needs (exact), or at least (CMake without EXACT); None
            when it names none.
        exact: Whether only ``torch`` itself will do.
        cxx_standard: The C++ standard it compiles with (17), if known.
        origin: Where the fact was read (``Cargo.lock:41:11``).
        how: One line: what was read (``flodl-sys 0.5.3 in Cargo.lock``).
        source: The table row's source (empty for CMake).
        reads: The variable its build reads to find libtorch.
    """

    framework: str
    title: str
    release: str | None
    torch: str | None
    exact: bool
    cxx_standard: int | None
    origin: str
    how: str
    source: str = ""
    reads: str = ""

    @property
    def label(self) -> str:
        """``floDl 0.5.3`` (or the CMake project's description)."""
        return f"{self.title} {self.release}" if self.release else self.title

    def refusal(self, torch: str) -> str | None:
        """Why the framework cannot compile against ``torch`` (a full version), or None."""
        from fdl import compat

        if self.torch is not None:
            want, got = compat.version_key(self.torch), compat.version_key(torch)
            if self.exact and got[:3] != want[:3]:
                return f"{self.label} compiles against torch {self.torch} only ({self.origin})"
            if not self.exact and got[:3] < want[:3]:
                return f"{self.label} asks for torch {self.torch} or newer ({self.origin})"
        if self.cxx_standard is not None:
            try:
                needed = compat.headers_cxx_standard(torch)
            except UsageError:
                return None
            if needed > self.cxx_standard:
                return (
                    f"torch {torch}'s headers require C++{needed}, and {self.label} compiles "
                    f"with C++{self.cxx_standard} ({self.origin})"
                )
        return None

    def best_torch(self) -> str | None:
        """The torch to use when nothing else is asked: the pinned one; else, when the
        newest known release will not do (its headers need a newer C++), the newest that
        will; else None (free: fdl's usual choice, the newest)."""
        from fdl import compat

        if self.torch is not None and self.exact:
            return compat.resolve_torch_version(self.torch)
        known = [rel.latest for rel in reversed(compat.releases())]
        newest = self.refusal(known[0])
        if newest is None:
            return None
        found = next((torch for torch in known if self.refusal(torch) is None), None)
        if found is None:
            raise ManifestError(
                f"no torch release fdl knows fits {self.how}: for torch {known[0]}, {newest}",
                location=_as_location(self.origin),
                hint=f"ask for a release fdl knows ({known[-1]} to {known[0]}) and a C++ "
                "standard its headers accept (17, or 20 from torch 2.14), or use a newer fdl",
            )
        return found

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def detect_framework(directory: Path) -> tuple[FrameworkPin, ...]:
    """The frameworks of the project at ``directory``: from ``Cargo.lock``, else
    ``Cargo.toml``, plus what ``CMakeLists.txt`` asks of libtorch.

    Raises:
        ManifestError: a framework release the table does not know (at its file:line:col),
            or a project file that cannot be read or parsed.
    """
    pins = _cargo_pins(directory)
    cmake = _from_cmake(directory)
    if cmake is not None:
        pins.append(cmake)
    return tuple(pins)


# --- Cargo.lock ------------------------------------------------------------------------


def _cargo_pins(directory: Path) -> list[FrameworkPin]:
    """The pins of ``Cargo.lock``, else of ``Cargo.toml`` (a file absent, or naming no
    framework: the next)."""
    for name, pins_of in (("Cargo.lock", _from_lock), ("Cargo.toml", _from_cargo_toml)):
        path = directory / name
        text = _read(path)
        if text is None:
            continue
        pins = list(pins_of(directory, path, text, _toml(path, text)))
        if pins:
            return pins
    return []


def _from_lock(
    directory: Path, path: Path, text: str, data: Mapping[str, Any]
) -> Iterator[FrameworkPin]:
    from fdl import compat

    listed = data.get("package")
    packages = [p for p in listed if isinstance(p, Mapping)] if isinstance(listed, list) else []
    for known in compat.frameworks():
        for crate in known.crates:
            versions = sorted(
                {str(p.get("version")) for p in packages if p.get("name") == crate},
                key=_safe_key,
            )
            if not versions:
                continue
            for version in versions:
                where = _locate(
                    text, rf'name = "{re.escape(crate)}"\nversion = "({re.escape(version)})"'
                )
                origin = str(Location(path.name, *where))
                how = f"{crate} {version} in Cargo.lock"
                row = _exact(known.name, version, origin, learn=directory)
                if row.source.startswith("read by fdl at run time"):
                    from fdl.libtorch._crate_facts import facts_read

                    how += (
                        "; read from its crate at run time, not fdl's reviewed tables: "
                        f"{facts_read(row.source)}"
                    )
                yield _pin(row, origin, how, known.reads)
            break


# --- Cargo.toml ------------------------------------------------------------------------

_DEP_TABLES = ("dependencies", "dev-dependencies", "build-dependencies")


def _from_cargo_toml(
    directory: Path, path: Path, text: str, data: Mapping[str, Any]
) -> Iterator[FrameworkPin]:
    from fdl import compat

    workspace = _table(data, "workspace")
    shared = _table(workspace, "package")
    seen: set[str] = set()
    # The project's own crates first: floDl's repository holds flodl and flodl-sys.
    for member, member_text, member_data in _own_crates(directory, path, text, data, workspace):
        package = member_data.get("package")
        if not isinstance(package, Mapping):
            continue
        known = compat.framework_for_crate(str(package.get("name")))
        if known is None or known.name in seen:
            continue
        version = package.get("version")
        if isinstance(version, Mapping) and version.get("workspace") is True:
            version = shared.get("version")
            where_text, where_path = text, path
            pattern = r"(?ms)^\[workspace\.package\][^\[]*?^version\s*=\s*\"([^\"]*)\""
        else:
            where_text, where_path = member_text, member
            pattern = r"(?ms)^\[package\][^\[]*?^version\s*=\s*\"([^\"]*)\""
        if not isinstance(version, str):
            continue
        origin = str(Location(_rel(where_path, directory), *_locate(where_text, pattern)))
        row = _exact(known.name, version, origin)
        seen.add(known.name)
        yield _pin(row, origin, f"{package.get('name')} {version} (this workspace)", known.reads)
    for known in compat.frameworks():
        if known.name in seen:
            continue
        found = _requirement(directory, path, text, data, workspace, known.crates)
        if found is None:
            continue
        crate, requirement, origin = found
        try:
            row = compat.matching_release(known.name, requirement)
        except compat.UnknownFrameworkRelease as exc:
            raise _located(exc, origin) from None
        how = (
            f'{crate} = "{requirement}" in Cargo.toml (no Cargo.lock: the newest release fdl '
            f"knows that matches, {row.version})"
        )
        yield _pin(row, origin, how, known.reads)


def _own_crates(
    directory: Path, path: Path, text: str, data: Mapping[str, Any], workspace: Mapping[str, Any]
) -> Iterator[tuple[Path, str, Mapping[str, Any]]]:
    yield path, text, data
    members = workspace.get("members")
    for pattern in members if isinstance(members, list) else []:
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        # Cargo's members are directories or simple globs (crates/*); a hostile `**` over a
        # large tree is cut short rather than walked whole.
        try:
            found = sorted(itertools.islice(directory.glob(pattern), _MAX_MEMBERS))
        except (NotImplementedError, ValueError, OSError):
            continue  # an absolute or malformed pattern: nothing of this project
        for member_dir in found:
            if not _inside(member_dir, directory):
                continue
            member = member_dir / "Cargo.toml"
            member_text = _read(member)
            if member_text is not None:
                yield member, member_text, _toml(member, member_text)


def _requirement(
    directory: Path,
    path: Path,
    text: str,
    data: Mapping[str, Any],
    workspace: Mapping[str, Any],
    crates: tuple[str, ...],
) -> tuple[str, str, str] | None:
    """(crate, requirement, origin) of the first of ``crates`` the manifest depends on."""
    for crate in crates:
        for table in _dependency_tables(data, workspace):
            spec = table.get(crate)
            if spec is None:
                continue
            if isinstance(spec, Mapping) and spec.get("workspace") is True:
                spec = _table(workspace, "dependencies").get(crate, spec)
            where = _dependency_origin(text, crate)
            origin = str(Location(path.name, *where))
            if isinstance(spec, str):
                return crate, spec, origin
            if isinstance(spec, Mapping) and isinstance(spec.get("version"), str):
                return crate, str(spec["version"]), origin
            if isinstance(spec, Mapping) and isinstance(spec.get("path"), str):
                try:
                    version = _path_version(directory, str(spec["path"]))
                except (OSError, RuntimeError, ValueError) as exc:  # NUL, a link loop
                    raise ManifestError(
                        f"{crate}'s path {str(spec['path'])[:200]!r} cannot be followed: "
                        f"{'a symbolic link loop' if isinstance(exc, RuntimeError) else exc}",
                        location=_as_location(origin),
                        hint=f"point {crate}'s path at the crate's directory, or set "
                        "libtorch.torch in fdl.yml",
                    ) from None
                if version is not None:
                    return crate, f"={version}", origin
            raise ManifestError(
                _unreadable(crate, spec),
                location=_as_location(origin),
                hint="create the lock file (cargo generate-lockfile) so fdl reads the "
                "resolved release, or set libtorch.torch in fdl.yml",
            )
    return None


def _unreadable(crate: str, spec: object) -> str:
    """Why a dependency's release cannot be read from Cargo.toml."""
    if isinstance(spec, Mapping) and "git" in spec:
        return f"{crate} comes from git without a version: fdl cannot tell its release"
    if isinstance(spec, Mapping) and "path" in spec:
        return f"{crate} comes from a path whose Cargo.toml names no version fdl can read"
    return f"{crate} = {spec!r} is not a dependency Cargo reads (a version string or a table)"


def _dependency_tables(
    data: Mapping[str, Any], workspace: Mapping[str, Any]
) -> Iterator[Mapping[str, Any]]:
    for name in _DEP_TABLES:
        if isinstance(data.get(name), Mapping):
            yield data[name]
    for target in _table(data, "target").values():
        if isinstance(target, Mapping):
            for name in _DEP_TABLES:
                if isinstance(target.get(name), Mapping):
                    yield target[name]
    if isinstance(workspace.get("dependencies"), Mapping):
        yield workspace["dependencies"]


def _dependency_origin(text: str, crate: str) -> tuple[int, int]:
    name = re.escape(crate)
    for pattern in (
        # [ \t]*, not \s*: \s* spans lines, and 60k blank lines took quadratic time.
        rf"(?m)^[ \t]*({name})[ \t]*=",
        rf'(?m)^[ \t]*"({name})"[ \t]*=',
        rf"(?m)^\[(?:[\w.'\"()-]*\.)?dependencies\.({name})\]",
    ):
        where = _locate(text, pattern)
        if where != (0, 0):
            return where
    return 0, 0


def _path_version(directory: Path, relative: str) -> str | None:
    crate_dir = (directory / relative).resolve()
    member = crate_dir / "Cargo.toml"
    text = _read(member)
    if text is None:
        return None
    package = _table(_toml(member, text), "package")
    version = package.get("version")
    if isinstance(version, str):
        return version
    # version.workspace = true: the workspace root above the crate holds it
    for parent in crate_dir.parents:
        root_text = _read(parent / "Cargo.toml")
        if root_text is None:
            continue
        root = _table(_toml(parent / "Cargo.toml", root_text), "workspace")
        shared = _table(root, "package").get("version")
        if isinstance(shared, str):
            return shared
    return None


# --- CMakeLists.txt --------------------------------------------------------------------

# An argument list ends at the next parenthesis and within 4096 characters: `[^)]*` scanned
# the rest of the file from every unclosed call (10k of them: 9.5 s; 4 MiB: most of an hour).
_FIND_TORCH = re.compile(r"(?im)^[ \t]*find_package\s*\(\s*(Torch)\b([^()]{0,4096})\)")
_CXX_STANDARD = re.compile(r"(?im)^[ \t]*set\s*\(\s*CMAKE_CXX_STANDARD\s+(\d+)\s*\)")
_CXX_FEATURE = re.compile(r"(?im)target_compile_features\s*\([^()]{0,4096}?\bcxx_std_(\d+)")


def _from_cmake(directory: Path) -> FrameworkPin | None:
    path = directory / "CMakeLists.txt"
    text = _read(path)
    if text is None:
        return None
    found = _FIND_TORCH.search(text)
    if found is None:
        return None
    args = found.group(2).split()
    version = args[0] if args and re.fullmatch(r"\d+(\.\d+)*", args[0]) else None
    exact = version is not None and "EXACT" in (a.upper() for a in args[1:])
    standard = _CXX_STANDARD.search(text) or _CXX_FEATURE.search(text)
    if standard is not None and len(standard.group(1)) > 2:
        raise ManifestError(
            f"C++ standard {standard.group(1)[:12]}{'...' if len(standard.group(1)) > 12 else ''}"
            " is no C++ standard",
            location=Location(path.name, *_line_col(text, standard.start(1))),
            hint="name one of 11, 14, 17, 20, 23 (CMAKE_CXX_STANDARD or cxx_std_NN)",
        )
    cxx = int(standard.group(1)) if standard else None
    where = _line_col(text, found.start(1))
    if version is not None:
        where = _line_col(text, found.start(2) + found.group(2).index(version))
    origin = str(Location(path.name, *where))
    parts = [f"find_package(Torch{' ' + version if version else ''}{' EXACT' if exact else ''})"]
    if cxx is not None:
        parts.append(f"C++{cxx}")
    how = f"{', '.join(parts)} in CMakeLists.txt"
    if version is not None and exact:
        version = _exact_torch(version, origin)
    return FrameworkPin("cmake", _CMAKE, None, version, exact, cxx, origin, how, reads="Torch_DIR")


def _exact_torch(version: str, origin: str) -> str:
    from fdl import compat

    try:
        return compat.resolve_torch_version(version)
    except UsageError as exc:
        raise ManifestError(
            f"find_package(Torch {version} EXACT): {exc.message}",
            location=_as_location(origin),
            hint=exc.hint,
        ) from None


# --- helpers ---------------------------------------------------------------------------


def _exact(name: str, version: str, origin: str, *, learn: Path | None = None) -> FrameworkRelease:
    """The table's row of ``name`` ``version``; with ``learn`` (the project's directory: a
    release Cargo.lock names), a release the tables lack is read from its crates in
    cargo's cache (:mod:`fdl.libtorch._crate_facts`)."""
    from fdl import compat

    try:
        return compat.framework_release(name, version)
    except compat.UnknownFrameworkRelease as exc:
        if learn is None:
            raise _located(exc, origin) from None
        unknown = exc
    from fdl.libtorch._crate_facts import release_from_crates

    return release_from_crates(unknown, version, _as_location(origin), learn, CHECK_KEY)


def _pin(row: FrameworkRelease, origin: str, how: str, reads: str) -> FrameworkPin:
    return FrameworkPin(
        row.framework,
        row.title,
        row.version,
        row.torch,
        True,
        row.cxx_standard,
        origin,
        how,
        row.source,
        reads,
    )


def _located(exc: UnknownFrameworkRelease, origin: str) -> ManifestError:
    newest = exc.newest
    return ManifestError(
        exc.message,
        location=_as_location(origin),
        hint=f"{exc.hint}; use that release, or set libtorch.torch in fdl.yml with "
        f"{CHECK_KEY}: false if you know which torch {newest.title} needs",
    )


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _as_location(origin: str) -> Location:
    name, _, rest = origin.partition(":")
    line, _, column = rest.partition(":")
    return Location(name, int(line or 0), int(column or 0))


def _read(path: Path) -> str | None:
    from fdl._files import NotARegularFile, read_small_text, reason_of

    try:
        return read_small_text(path, limit=_LIMIT)
    except (NotARegularFile, OSError) as exc:
        raise ManifestError(
            f"cannot read {path.name}: {reason_of(exc)}",
            location=Location(path.name),
            hint=f"fix or remove {path}",
        ) from None


def _toml(path: Path, text: str) -> Mapping[str, Any]:
    from fdl._files import load_toml

    try:
        return load_toml(text)
    except ValueError as exc:
        raise ManifestError(
            f"{path.name} is not valid TOML: {exc}",
            location=Location(path.name),
            hint=f"fix {path.name} (cargo metadata shows where)",
        ) from None


def _locate(text: str, pattern: str) -> tuple[int, int]:
    found = re.search(pattern, text)
    if found is None:
        return 0, 0
    group = 1 if found.re.groups else 0
    return _line_col(text, found.start(group))


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def _rel(path: Path, directory: Path) -> str:
    try:
        return str(path.relative_to(directory))
    except ValueError:
        return path.name


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def _safe_key(version: str) -> tuple[int, ...]:
    from fdl import compat

    try:
        return compat.version_key(version)
    except ValueError:
        return ()
