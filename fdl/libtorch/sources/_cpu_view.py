"""A CPU libtorch from a package index that serves only CUDA builds of torch: the CPU view.

PyPI's x86_64 torch wheels are CUDA builds (torch 2.10.0: 873 MiB, and 15 NVIDIA wheels,
3.7 GB in all, to install them as they are). CPU builds exist only on PyTorch's own index,
which many networks cannot reach. A CPU program needs little of a CUDA wheel:
``libtorch_cpu.so`` and what it loads from the wheel (``libc10.so``, ``libgomp.so.1``),
the two NVIDIA runtime libraries ``libtorch_cpu.so`` names (``libcudart``, ``libcupti``:
the profiler's, loaded whether a GPU is used or not), the headers, and a CMake package.

The view reads those members out of the wheels on the index with HTTP Range requests
(:mod:`fdl.archive`'s remote zip), about an eighth of the wheel, and never downloads the
rest. It is recorded as what it is: a CPU variant (``cuda: null``, ``.arch cuda=none``)
whose ``source`` says it is a CPU view of a CUDA build (``view: cpu``, ``wheel_cuda``),
with the members it left out; ``fdl libtorch info`` and ``verify`` say so.

What it cannot keep from the wheel is the CMake package: PyTorch's ``Caffe2Targets.cmake``
declares ``torch_cuda`` and ``c10_cuda``, whose files the view does not hold, and its
``Caffe2Config.cmake`` looks for a CUDA toolkit. The view writes its own
``TorchConfig.cmake`` for what it holds (imported ``c10`` and ``torch_cpu``, an interface
``torch`` that links both, the include directories and ``TORCH_LIBRARIES``, as
``find_package(Torch)`` callers use them) and keeps the wheel's
``TorchConfigVersion.cmake``, so ``find_package(Torch 2.10 EXACT)`` works as before.

Every member is checked against the zip's CRC-32 and, for torch's, the wheel's
``RECORD`` (sha256); the byte ranges read are kept in fdl's cache, so a second install
reads nothing.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from fdl._grammar import FACTS, count, fill
from fdl.archive import ArchiveError, Span, ZipMember, extract_span, plan_spans, zip_members
from fdl.binaries import BinaryFormatError, read_dynamic
from fdl.compat import runtime_libraries
from fdl.errors import EnvironmentProblem, NetworkError, UsageError
from fdl.libtorch import variants
from fdl.libtorch._install import InstallResult, Target, installed_build_version
from fdl.libtorch.sources import install_source, occupied
from fdl.locking import FileLock
from fdl.net import IndexFile, Progress, fetch_range, index_files, read_range
from fdl.paths import Context

__all__ = [
    "CORE_LIBRARIES",
    "CpuView",
    "FromCpuView",
    "ViewWheel",
    "choose_wheel",
    "find_cpu_view",
    "install_cpu_view",
    "local_wheel",
    "populate_cpu_view",
]

LineCallback = Callable[[str], None]
ProgressCallback = Callable[[str, Progress], None]

# What a CPU program links; the rest of its closure inside the wheel is read off them.
CORE_LIBRARIES = ("libtorch_cpu.so", "libc10.so")
_LIB, _INCLUDE, _CMAKE = "torch/lib/", "torch/include/", "torch/share/cmake/Torch/"
_VERSION_FILE = "TorchConfigVersion.cmake"
# name-version(-build)?-python-abi-platform.whl
_WHEEL = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<tags>[^-]+-[^-]+-[^-]+)\.whl$"
)
_SMALL = 16 << 20  # METADATA, version.py, RECORD: far smaller


@dataclass(frozen=True)
class ViewWheel:
    """A wheel on an index (or a local ``file://`` one) the view reads members of."""

    filename: str
    url: str
    sha256: str | None = None
    size: int | None = None

    @property
    def version(self) -> str:
        found = _WHEEL.match(self.filename)
        return found.group("version") if found else ""


@dataclass
class CpuView:
    """What the view is made of, and what reading it cost.

    Attributes:
        torch: The release (``2.10.0``).
        wheel: The torch wheel read.
        index: Where the wheel was found (None for a local file).
        nvidia_index: Where the NVIDIA wheels of a local file are looked up (None:
            ``$PIP_INDEX_URL``, else PyPI); the wheel's own index otherwise.
        wheel_cuda: The CUDA the wheel was built with (None: a CPU wheel, nothing left out).
        libraries: The torch libraries taken (``libtorch_cpu.so``, ...).
        nvidia: (NVIDIA wheel file name, libraries taken from it).
        left_out: The wheel's libraries not taken.
        bytes_read: Bytes received from the index's file host in this install.
        bytes_cached: Bytes of byte ranges found in the cache instead.
    """

    torch: str
    wheel: ViewWheel
    index: str | None
    wheel_cuda: str | None = None
    nvidia_index: str | None = None
    git_version: str | None = None
    requires: tuple[str, ...] = ()
    libraries: list[str] = field(default_factory=list)
    nvidia: list[tuple[str, list[str]]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    bytes_read: int = 0
    bytes_cached: int = 0

    @property
    def nvidia_from(self) -> str | None:
        """The index the NVIDIA wheels are looked up on."""
        return self.index or self.nvidia_index

    @property
    def build_version(self) -> str:
        """The build the binaries are (``2.10.0+cu128``): the wheel's own version, with
        the CUDA tag PyPI's default builds leave out."""
        if "+" in self.wheel.version or not self.wheel_cuda:
            return self.wheel.version if "+" in self.wheel.version else f"{self.torch}+cpu"
        return f"{self.torch}+cu{self.wheel_cuda.replace('.', '')}"


def choose_wheel(files: Iterable[IndexFile], torch: str, machine: str = "x86_64") -> ViewWheel:
    """The index's Linux wheel of torch ``torch`` for ``machine`` (any CPython tag: their C++
    parts are the same build); a ``+cpu`` build first, when the index has one.

    Raises:
        UsageError: the index lists no such wheel (the releases it has are named).
    """
    fitting: list[IndexFile] = []
    versions: set[str] = set()
    for item in files:
        found = _WHEEL.match(item.filename)
        if not found or found.group("name") != "torch" or item.yanked:
            continue
        version = found.group("version")
        if FACTS["torch-version"].first_refused(version) is None:  # named in the refusal
            versions.add(version.split("+", 1)[0])
        tags = found.group("tags")
        if version.split("+", 1)[0] != torch or not re.search(rf"linux\w*_{machine}", tags):
            continue
        fitting.append(item)
    if not fitting:
        known = sorted(versions, key=_version_key)[-5:]
        raise UsageError(
            f"the index lists no Linux {machine} wheel of torch {torch}"
            + (f" (its newest: {', '.join(known)})" if known else ""),
            hint="pass a release it has (--torch), or another index (--index-url)",
        )
    # a +cpu build first; then the highest build tag (a re-upload), as pip prefers it
    best = min(fitting, key=lambda f: ("+cpu" not in f.filename, -_build_tag(f), f.filename))
    return ViewWheel(best.filename, best.url, best.sha256, best.size)


def _build_tag(item: IndexFile) -> int:
    found = _WHEEL.match(item.filename)
    build = found.group("build") if found else None
    digits = re.match(r"[0-9]+", build or "")
    return (count(digits.group()) or 0) if digits else 0


def _version_key(version: str) -> tuple[int, ...]:
    """Sorts releases; a part that is no bounded ASCII number (``²``, 5000 digits) first."""
    return tuple(-1 if (n := count(p)) is None else n for p in version.split("."))


def local_wheel(path: Path) -> ViewWheel:
    """A ``.whl`` file on disk, read the same way (``file://``).

    Raises:
        UsageError: not a file.
    """
    if not path.is_file():
        raise UsageError(f"{path}: no such wheel file", hint="pass the path of a torch .whl file")
    resolved = path.resolve()
    return ViewWheel(resolved.name, resolved.as_uri(), None, resolved.stat().st_size)


def find_cpu_view(
    torch: str, index_url: str | None = None, *, machine: str = "x86_64"
) -> tuple[ViewWheel, str]:
    """The torch wheel the view of ``torch`` reads, and the index it was found on.

    Raises:
        NetworkError: the index cannot be read. UsageError: it has no such wheel.
    """
    from fdl.net import default_index

    index = index_url or default_index()
    return choose_wheel(index_files("torch", index), torch, machine), index


def populate_cpu_view(
    view: CpuView,
    tree: Path,
    cache: Path,
    *,
    machine: str = "x86_64",
    on_line: LineCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> variants.VariantInfo:
    """Fill ``tree`` (lib/, include/, share/) with the CPU view and return its metadata.

    Args:
        cache: Where the byte ranges read are kept (``<cache>/ranges/``).
        on_line: Told what is being read (a few lines).
        on_progress: Told ``(what, Progress)`` while a range over 1 MiB arrives.

    Raises:
        NetworkError: the index or its file host cannot be read.
        ArchiveError: a member does not match the zip's directory or the wheel's RECORD.
        EnvironmentProblem: the wheel does not hold a libtorch (no ``torch/lib``).
    """
    say = on_line or (lambda _text: None)
    reader = _Reader(view, cache, on_progress)
    say(f"reading the zip directory of {view.wheel.filename}")
    members = reader.members(view.wheel)
    _read_metadata(view, reader, members)
    tree.mkdir(parents=True, exist_ok=True)
    record = _record(reader.small(view.wheel, members, _dist_info(members, "RECORD")))

    cuda_build = _LIB + "libtorch_cuda.so" in members
    wanted = {m.name: m for m in members.values() if _kept(m.name, not cuda_build)}
    if not any(name.startswith(_LIB) for name in members):
        raise EnvironmentProblem(
            f"{view.wheel.filename} holds no torch/lib: not a wheel libtorch can come from",
            hint="pass a torch wheel (--torch VERSION)",
        )
    say(f"reading the headers and CMake files ({_mib(wanted.values())} MiB compressed)")
    reader.extract(view.wheel, wanted.values(), tree, _destination, record)
    core = CORE_LIBRARIES if cuda_build else (*CORE_LIBRARIES, "libtorch.so")
    libraries = _library_closure(view, reader, members, tree, record, core, say)
    view.libraries = sorted(libraries)
    view.left_out = sorted(
        m.name.removeprefix(_LIB)
        for m in members.values()
        if m.name.startswith(_LIB)
        and m.name.endswith(tuple(".so" + s for s in ("", ".1", ".2")))
        and m.name.removeprefix(_LIB) not in libraries
    )
    nvidia = _needed_elsewhere(tree / "lib", view.wheel_cuda)
    if nvidia:
        _bring_nvidia(view, reader, nvidia, tree / "lib", machine, say)
    if cuda_build:
        _write_cmake(tree, view)
        _write_link_script(tree / "lib", view)
    _write_build_files(tree, view)
    return _info(view)


def _mib(members: Iterable[ZipMember]) -> str:
    return f"{sum(m.compressed for m in members) / (1 << 20):.1f}"


def _kept(name: str, whole_cmake: bool) -> bool:
    """Headers, and of the CMake files the version file (a CPU wheel's: all of them)."""
    if name.endswith("/"):
        return False
    if whole_cmake and name.startswith("torch/share/cmake/"):
        return True
    return name.startswith(_INCLUDE) or name == _CMAKE + _VERSION_FILE


def _destination(member: ZipMember) -> str:
    return member.name.removeprefix("torch/")


def _dist_info(members: dict[str, ZipMember], name: str) -> ZipMember:
    for member in members.values():
        parts = member.name.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == name:
            return member
    raise EnvironmentProblem(
        f"the wheel has no .dist-info/{name}: not a wheel pip would install either",
        hint="pass another torch release (--torch) or another index (--index-url)",
    )


def _read_metadata(view: CpuView, reader: _Reader, members: dict[str, ZipMember]) -> None:
    metadata = reader.small(view.wheel, members, _dist_info(members, "METADATA"))
    headers = HeaderParser().parsestr(metadata.decode("utf-8", "replace"))
    if (headers.get("Name") or "").lower() != "torch":
        raise UsageError(
            f"{view.wheel.filename} is not a PyTorch wheel (its name is {headers.get('Name')!r})",
            hint="pass a torch wheel",
        )
    view.requires = tuple(headers.get_all("Requires-Dist") or ())
    version_py = members.get("torch/version.py")
    values: dict[str, str | None] = {}
    if version_py is not None:
        text = reader.small(view.wheel, members, version_py).decode("utf-8", "replace")
        from fdl.libtorch.sources._wheel import parse_version_py

        values = parse_version_py(text)
    view.wheel_cuda = values.get("cuda") or None
    view.git_version = values.get("git_version") or None
    _check_facts(view)


def _check_facts(view: CpuView) -> None:
    """The wheel's version (its file name's) and ``version.py``'s CUDA and commit, held
    against their grammars before any of them is written into the variant: index text
    never becomes CMake or linker-script code."""
    from fdl._grammar import checked
    from fdl._text import printable
    from fdl.errors import FdlError

    error: type[FdlError]
    if view.index:
        source, error = (
            f"the wheel {printable(view.wheel.filename, 120)} on {view.index}",
            NetworkError,
        )
    else:
        source, error = str(Path(view.wheel.url.removeprefix("file://"))), EnvironmentProblem
    hint = (
        "the index serves a crafted or damaged torch wheel: pass another index (--index-url)"
        if view.index
        else "pass a torch wheel downloaded from PyPI or download.pytorch.org"
    )
    facts = [("torch-version", "its version", view.wheel.version)]
    facts += [("torch-version", "its release", view.torch)]
    if view.wheel_cuda:
        facts.append(("cuda", "version.py's cuda", view.wheel_cuda))
    if view.git_version:
        facts.append(("commit", "version.py's git_version", view.git_version))
    for kind, what, value in facts:
        checked(kind, value, what=what, source=source, hint=hint, error=error)


def _record(text: bytes) -> dict[str, tuple[str, int]]:
    """The wheel's RECORD (CSV: name, ``sha256=`` urlsafe base64 without padding, size):
    member -> (sha256 as hex, size). A digest that is no sha256 is kept as ``""``, which
    no member matches.

    Raises:
        ArchiveError: RECORD is not CSV.
    """
    found: dict[str, tuple[str, int]] = {}
    lines = io.StringIO(text.decode("utf-8", "replace").replace("\0", ""), newline="")
    try:
        rows = list(csv.reader(lines))
    except csv.Error as exc:
        raise ArchiveError(f"the wheel's RECORD is not a CSV file: {exc}", hint=_DAMAGED) from None
    for row in rows:
        size = count(row[2]) if len(row) == 3 else None
        if size is None or not row[1].startswith("sha256="):
            continue
        encoded = row[1].removeprefix("sha256=")
        try:
            raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except ValueError:  # binascii.Error: not base64
            raw = b""
        found[row[0]] = (raw.hex() if len(raw) == 32 else "", size)
    return found


def _library_closure(
    view: CpuView,
    reader: _Reader,
    members: dict[str, ZipMember],
    tree: Path,
    record: dict[str, tuple[str, int]],
    core: tuple[str, ...],
    say: LineCallback,
) -> set[str]:
    """The wheel's libraries a CPU program loads: the ``core`` ones and, read off their
    DT_NEEDED, every library of ``torch/lib`` they need, transitively."""
    taken: set[str] = set()
    wanted = {name for name in core if _LIB + name in members}
    if "libtorch_cpu.so" not in wanted:
        raise EnvironmentProblem(
            f"{view.wheel.filename} has no torch/lib/libtorch_cpu.so",
            hint="pass a torch release from 1.10 on (--torch)",
        )
    while wanted - taken:
        batch = sorted(wanted - taken)
        chosen = [members[_LIB + name] for name in batch]
        say(f"reading {', '.join(batch)} ({_mib(chosen)} MiB compressed)")
        reader.extract(view.wheel, chosen, tree, _destination, record)
        taken |= set(batch)
        for name in batch:
            try:
                needed = read_dynamic(tree / "lib" / name).needed
            except BinaryFormatError as exc:
                raise EnvironmentProblem(
                    f"{view.wheel.filename}: {name} is not a readable library: {exc.message}",
                    hint="pass another torch release (--torch)",
                ) from None
            wanted |= {n for n in needed if _LIB + n in members}
    return taken


def _needed_elsewhere(lib_dir: Path, cuda: str | None) -> set[str]:
    """Sonames the view's libraries need that the view does not hold: those neither the
    view nor the system provides, and the NVIDIA runtime libraries of the wheel's CUDA
    wherever they are found (a CUDA toolkit in ld.so.conf): the view holds them from their
    wheels, so that it is the same tree whichever machine made it."""
    from fdl.binaries import dependency_closure
    from fdl.compat import injected_libraries

    try:
        nvidia = [lib for lib in runtime_libraries(cuda) if lib.wheel] if cuda else []
    except UsageError:  # a CUDA fdl has no table for: _bring_nvidia says so if needed
        nvidia = []
    own = lib_dir.resolve()
    missing: set[str] = set()
    for library in sorted(lib_dir.glob("*.so*")):
        closure = dependency_closure(library, [lib_dir], skip=set(injected_libraries()))
        missing |= {name for name, _ in closure.missing}
        missing |= {
            name
            for name, path in closure.found
            if path.resolve().parent != own and any(lib.matches(name) for lib in nvidia)
        }
    return missing


def _bring_nvidia(
    view: CpuView,
    reader: _Reader,
    sonames: set[str],
    lib_dir: Path,
    machine: str,
    say: LineCallback,
) -> None:
    """Each NVIDIA soname from the NVIDIA wheel the torch wheel pins (its Requires-Dist,
    directly or through the ``cuda-toolkit`` meta package), found through fdl's runtime
    table (soname -> wheel and where the wheel keeps it)."""
    if not view.wheel_cuda:
        raise EnvironmentProblem(
            f"the CPU wheel's libraries need {', '.join(sorted(sonames))}, which it lacks",
            hint="install the wheel itself: fdl libtorch install --from-wheel FILE.whl",
        )
    pins = _pins(view.requires, machine=machine)
    by_wheel: dict[tuple[str, str], list[str]] = {}
    unknown = []
    for soname in sorted(sonames):
        library = next(
            (lib for lib in runtime_libraries(view.wheel_cuda) if lib.matches(soname)), None
        )
        project = _canonical(library.wheel) if library and library.wheel else None
        if project is not None and project not in pins:
            pins.update(_toolkit_pins(view, reader, machine))
        if library is None or project is None or project not in pins:
            unknown.append(soname)
            continue
        by_wheel.setdefault((project, library.wheel_dir or ""), []).append(soname)
    if unknown:
        raise EnvironmentProblem(
            f"{view.wheel.filename}: its CPU libraries need {', '.join(unknown)}, which no "
            "NVIDIA wheel it pins is known to provide",
            hint="install the whole wheel instead: fdl libtorch install --from-wheel "
            f"--torch {view.torch} (3-4 GB with its NVIDIA wheels)",
        )
    for (project, directory), names in sorted(by_wheel.items()):
        files = index_files(project, view.nvidia_from)
        wheel = _pinned_wheel(files, project, pins[project], machine)
        say(f"reading {', '.join(names)} from {wheel.filename}")
        members = reader.members(wheel)
        chosen = []
        for soname in names:
            member = members.get(f"{directory.rstrip('/')}/{soname}")
            if member is None:
                raise EnvironmentProblem(
                    f"{wheel.filename} has no {directory}/{soname}",
                    hint="fdl's runtime table (fdl/data/compat/runtime.yaml) is out of date "
                    "for it: report it",
                )
            chosen.append(member)
        reader.extract(wheel, chosen, lib_dir, lambda m: m.name.rsplit("/", 1)[-1], {})
        view.nvidia.append((wheel.filename, names))


def _pins(
    requires: Iterable[str], extras: Iterable[str] = (), *, machine: str = "x86_64"
) -> dict[str, str]:
    """``project -> specifier`` (``==12.8.90``, ``==13.0.96.*``) of the ``==``
    requirements that apply on Linux on ``machine`` with ``extras`` chosen."""
    from packaging.requirements import InvalidRequirement, Requirement

    environment = {"platform_system": "Linux", "sys_platform": "linux"}
    environment["platform_machine"] = machine
    chosen = list(extras) or [""]
    found: dict[str, str] = {}
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if marker is not None and not any(
            marker.evaluate({**environment, "extra": extra}) for extra in chosen
        ):
            continue
        if [s.operator for s in requirement.specifier] == ["=="]:
            found[_canonical(requirement.name)] = str(requirement.specifier)
    return found


def _toolkit_pins(view: CpuView, reader: _Reader, machine: str) -> dict[str, str]:
    """The pins of the ``cuda-toolkit[...]==V`` meta package a torch wheel requires (CUDA
    13 wheels name their NVIDIA wheels through it), read from its wheel's METADATA."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in view.requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if _canonical(requirement.name) != "cuda-toolkit":
            continue
        files = index_files("cuda-toolkit", view.nvidia_from)
        wheel = _pinned_wheel(files, "cuda-toolkit", str(requirement.specifier), machine)
        members = reader.members(wheel)
        text = reader.small(wheel, members, _dist_info(members, "METADATA"))
        headers = HeaderParser().parsestr(text.decode("utf-8", "replace"))
        requires = headers.get_all("Requires-Dist") or ()
        return _pins(requires, requirement.extras, machine=machine)
    return {}


def _pinned_wheel(files: list[IndexFile], project: str, pin: str, machine: str) -> ViewWheel:
    """The newest wheel of ``project`` that ``pin`` allows, for Linux on ``machine`` (or
    for any platform).

    Raises:
        NetworkError: the index lists none.
    """
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    allowed = SpecifierSet(pin)
    fitting: list[tuple[Version, IndexFile]] = []
    for item in files:
        found = _WHEEL.match(item.filename)
        if not found or _canonical(found.group("name")) != project or item.yanked:
            continue
        if not re.search(rf"(linux\w*_{machine}|-any)$", found.group("tags")):
            continue
        try:
            version = Version(found.group("version"))
        except InvalidVersion:
            continue
        if allowed.contains(version, prereleases=True):
            fitting.append((version, item))
    if not fitting:
        raise NetworkError(
            f"the index lists no Linux {machine} wheel of {project}{pin}",
            hint="pass an index that mirrors NVIDIA's wheels too (--index-url)",
        )
    best = max(fitting, key=lambda pair: pair[0])[1]
    return ViewWheel(best.filename, best.url, best.sha256, best.size)


def _canonical(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


class _Reader:
    """Reads members of remote wheels: directories, small members, and byte ranges kept
    in the cache (``<cache>/ranges/<wheel>/<start>-<length>``) for the next install."""

    def __init__(self, view: CpuView, cache: Path, on_progress: ProgressCallback | None) -> None:
        self.view, self.cache, self.on_progress = view, cache / "ranges", on_progress

    def _read(self, url: str, start: int, length: int | None) -> tuple[bytes, int]:
        data, total = read_range(url, start, length)
        self.view.bytes_read += len(data)
        return data, total

    def members(self, wheel: ViewWheel) -> dict[str, ZipMember]:
        return zip_members(wheel.url, self._read)

    def small(self, wheel: ViewWheel, members: dict[str, ZipMember], member: ZipMember) -> bytes:
        if member.size > _SMALL:
            raise EnvironmentProblem(
                f"{wheel.filename}: {member.name} is {member.size} bytes, not a metadata file",
                hint="pass another torch wheel",
            )
        scratch = self.cache / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        out = scratch / hashlib.sha256(f"{wheel.url}:{member.name}".encode()).hexdigest()
        self.extract(wheel, [member], scratch, lambda _m: out.name, {})
        try:
            return out.read_bytes()
        finally:
            out.unlink(missing_ok=True)

    def extract(
        self,
        wheel: ViewWheel,
        members: Iterable[ZipMember],
        root: Path,
        destination: Callable[[ZipMember], str],
        record: dict[str, tuple[str, int]],
    ) -> None:
        # a local wheel's ranges are not kept: the file is at hand (a copy would only take
        # disk space), and one rebuilt under the same name must not be read from the cache
        local = wheel.url.startswith("file:")
        for span in plan_spans(members):
            data = self._span(wheel, span)
            try:
                extract_span(wheel.filename, span, data, lambda m: root / destination(m))
                for member in span.members:
                    expected = record.get(member.name)
                    if expected is not None:
                        _check_record(wheel, member, root / destination(member), expected)
            except ArchiveError as exc:
                # not kept: the next run reads the range again instead of failing the same
                data.unlink(missing_ok=True)
                raise ArchiveError(exc.message, hint=_DAMAGED) from None
            finally:
                if local:
                    data.unlink(missing_ok=True)

    def _span(self, wheel: ViewWheel, span: Span) -> Path:
        what = f"{wheel.filename} [{span.length / (1 << 20):.1f} MiB]"
        progress = self.on_progress

        def report(state: Progress) -> None:
            if progress is not None and span.length > (1 << 20):
                progress(what, state)

        if wheel.url.startswith("file:"):  # read for this install alone, removed after it
            name = f"{os.getpid()}-{secrets.token_hex(4)}-{span.start}-{span.length}"
            data = self.cache / "scratch" / name
            self.view.bytes_read += fetch_range(
                wheel.url, data, span.start, span.length, on_progress=report
            )
            return data
        folder = self.cache / _safe_name(wheel.sha256 or wheel.filename)
        data = folder / f"{span.start}-{span.length}"
        if data.is_file() and data.stat().st_size == span.length:
            self.view.bytes_cached += span.length
            return data
        folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(folder / ".lock", purpose=f"reading {wheel.filename}")
        with lock:  # another install reading the same wheel finishes first, then we reuse it
            if data.is_file() and data.stat().st_size == span.length:
                self.view.bytes_cached += span.length
                return data
            self.view.bytes_read += fetch_range(
                wheel.url, data, span.start, span.length, on_progress=report
            )
        return data


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", text)[:128]


_DAMAGED = (
    "run the same command again (the damaged bytes were not kept); if it fails the same "
    "way, the index serves a damaged or altered wheel: pass another index (--index-url)"
)


def _check_record(
    wheel: ViewWheel, member: ZipMember, path: Path, expected: tuple[str, int]
) -> None:
    from fdl._files import file_sha256

    digest, size = expected
    if path.stat().st_size != size or file_sha256(path) != digest:
        raise ArchiveError(
            f"{wheel.filename}: {member.name} does not match the wheel's RECORD", hint=_DAMAGED
        )


_CMAKE_CONFIG = """\
# TorchConfig.cmake of a CPU view made by fdl (fdl libtorch install --from-wheel --cpu).
#
# This libtorch holds the CPU libraries of the torch {build} wheel: libtorch_cpu and
# libc10 (and what they load), not libtorch_cuda. The wheel's own CMake package declares
# its CUDA libraries and looks for a CUDA toolkit, so it cannot describe this tree; this
# file declares what the tree holds, with the variables and the `torch` target that
# find_package(Torch) callers use. TorchConfigVersion.cmake is the wheel's own.
#
#   TORCH_FOUND, TORCH_INCLUDE_DIRS, TORCH_LIBRARIES, TORCH_CXX_FLAGS, target `torch`
include(FindPackageHandleStandardArgs)
get_filename_component(TORCH_INSTALL_PREFIX "${{CMAKE_CURRENT_LIST_DIR}}/../../../" ABSOLUTE)
set(TORCH_INCLUDE_DIRS
  "${{TORCH_INSTALL_PREFIX}}/include"
  "${{TORCH_INSTALL_PREFIX}}/include/torch/csrc/api/include")
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={abi}")
if(NOT TARGET c10)
  add_library(c10 SHARED IMPORTED)
  set_target_properties(c10 PROPERTIES
    IMPORTED_LOCATION "${{TORCH_INSTALL_PREFIX}}/lib/libc10.so"
    INTERFACE_INCLUDE_DIRECTORIES "${{TORCH_INCLUDE_DIRS}}")
endif()
if(NOT TARGET torch_cpu)
  add_library(torch_cpu SHARED IMPORTED)
  set_target_properties(torch_cpu PROPERTIES
    IMPORTED_LOCATION "${{TORCH_INSTALL_PREFIX}}/lib/libtorch_cpu.so"
    INTERFACE_LINK_LIBRARIES c10)
endif()
if(NOT TARGET torch)
  add_library(torch INTERFACE IMPORTED)
  # --no-as-needed: the operators register themselves when libtorch_cpu is loaded
  set_target_properties(torch PROPERTIES
    INTERFACE_LINK_LIBRARIES "-Wl,--no-as-needed,\\"${{TORCH_INSTALL_PREFIX}}/lib/libtorch_cpu.so\\" -Wl,--as-needed;torch_cpu;c10"
    INTERFACE_INCLUDE_DIRECTORIES "${{TORCH_INCLUDE_DIRS}}"
    INTERFACE_COMPILE_OPTIONS "${{TORCH_CXX_FLAGS}}")
endif()
set(TORCH_LIBRARIES torch)
set(TORCH_LIBRARY "${{TORCH_INSTALL_PREFIX}}/lib/libtorch_cpu.so")
find_package_handle_standard_args(Torch DEFAULT_MSG TORCH_LIBRARY TORCH_INCLUDE_DIRS)
"""


LINK_SCRIPT_MARK = b"/* fdl: CPU view"
_LINK_SCRIPT = """\
/* fdl: CPU view of the torch {build} wheel. Its libtorch.so needs libtorch_cuda.so,
   which this libtorch does not hold; this GNU ld script stands in for it at link time, as
   glibc's libc.so does: -ltorch links the CPU libraries, and no program loads a
   libtorch.so at run time. */
INPUT(-ltorch_cpu -lc10)
"""


def _write_link_script(lib_dir: Path, view: CpuView) -> None:
    """``lib/libtorch.so`` for the linkers of programs that link ``-ltorch`` (tch-rs's
    torch-sys, floDl, most hand-written build scripts)."""
    text = fill("linker", _LINK_SCRIPT, build=view.build_version, **_FILL)
    (lib_dir / "libtorch.so").write_text(text, encoding="utf-8")


def _write_build_files(tree: Path, view: CpuView) -> None:
    """``build-version`` and ``build-hash``: one line each."""
    line = fill("line", "{build_version}\n", build_version=view.build_version, **_FILL)
    (tree / "build-version").write_text(line, encoding="utf-8")
    if view.git_version:
        line = fill("line", "{git_version}\n", git_version=view.git_version, **_FILL)
        (tree / "build-hash").write_text(line, encoding="utf-8")


def _write_cmake(tree: Path, view: CpuView) -> None:
    from fdl.libtorch._scan import detect_abi

    folder = tree / "share" / "cmake" / "Torch"
    folder.mkdir(parents=True, exist_ok=True)
    abi = "0" if detect_abi(tree) == "pre-cxx11" else "1"
    text = fill("cmake", _CMAKE_CONFIG, build=view.build_version, abi=abi, **_FILL)
    (folder / "TorchConfig.cmake").write_text(text, encoding="utf-8")
    if not (folder / _VERSION_FILE).is_file():
        text = fill("cmake", _CMAKE_VERSION, torch=view.torch, **_FILL)
        (folder / _VERSION_FILE).write_text(text, encoding="utf-8")


_CMAKE_VERSION = """\
set(PACKAGE_VERSION "{torch}")
if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
if(NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
"""
# the facts were checked where they were read (_check_facts); this is the writers' own rule
_FILL = {
    "source": "the CPU view's wheel",
    "hint": "pass another torch wheel (--torch, --index-url or a .whl file)",
}


def _info(view: CpuView) -> variants.VariantInfo:
    where: dict[str, Any] = {"wheel": view.wheel.url}
    if view.wheel.sha256:
        where["wheel_sha256"] = view.wheel.sha256
    if view.index:
        where["index"] = view.index
    elif view.nvidia_index and view.nvidia:
        where["nvidia_index"] = view.nvidia_index
    return variants.VariantInfo(
        name="",
        torch=view.torch,
        cuda=None,
        source={
            "kind": "wheel",
            "view": "cpu",
            "variant": "cpu",
            "build_version": view.build_version,
            "wheel_version": view.wheel.version,
            "wheel_cuda": view.wheel_cuda,
            "git_version": view.git_version,
            **where,
            "fetched_by": f"fdl libtorch install --from-wheel --cpu --torch {view.torch}",
        },
        extra={
            "cpu_view": {
                "libraries": view.libraries,
                "nvidia_libraries": [
                    {"from": name, "libraries": libs} for name, libs in view.nvidia
                ],
                "left_out": view.left_out,
                "bytes_read": view.bytes_read,
                "bytes_cached": view.bytes_cached,
                "wheel_size": view.wheel.size,
            }
        },
    )


@dataclass
class FromCpuView:
    """The CPU view of a torch wheel: the ``cpu-view`` source.

    The wheel is the index's wheel of release ``torch`` (on ``index_url``, else
    ``$PIP_INDEX_URL`` or PyPI) or the file ``wheel`` (whose NVIDIA wheels come from
    ``index_url`` too); :meth:`locate` looks it up (once), on first need: describing the
    source reads nothing.

    Attributes:
        torch: The release on the index (``2.10`` or ``2.10.0``; None: the newest known).
        wheel: A ``.whl`` file instead.
        index_url: The package index.
        cache: Where the byte ranges read are kept (None: ``wheels/`` in fdl's cache).
        on_message: Told what is being read (a few lines).
        on_progress: Told ``(what, Progress)`` while a large range arrives.
    """

    torch: str | None = None
    wheel: Path | None = None
    index_url: str | None = None
    cache: Path | None = None
    on_message: LineCallback | None = None
    on_progress: ProgressCallback | None = None
    _view: CpuView | None = field(default=None, init=False, repr=False)

    kind = "cpu-view"
    default_name = "precompiled/cpu"

    def describe(self) -> str:
        if self.wheel is not None:
            what = self.wheel.name
        elif self.index_url:
            what = f"torch {self._release()}'s wheel on {self.index_url}"
        else:
            what = f"PyPI's torch {self._release()} wheel"
        return f"the CPU view of {what}: only what a CPU program loads"

    def _release(self) -> str:
        from fdl.compat import resolve_torch_version

        torch = self.torch
        return torch if torch and torch.count(".") >= 2 else resolve_torch_version(torch)

    def locate(self) -> CpuView:
        """What the view reads: the file, or the index's wheel (looked up the first time).

        Raises:
            UsageError: no such file, or the index has no such wheel.
            NetworkError: the index cannot be read.
        """
        if self._view is None:
            if self.wheel is not None:
                found, index = local_wheel(self.wheel.expanduser()), None
                release = found.version.split("+", 1)[0]
            else:
                release = self._release()
                if self.on_message is not None:
                    self.on_message(f"looking up torch {release} on the package index")
                found, index = find_cpu_view(release, self.index_url)
            # a local wheel's NVIDIA wheels come from --index-url too, as the index's wheel's do
            nvidia_index = self.index_url if index is None else None
            self._view = CpuView(torch=release, wheel=found, index=index, nvidia_index=nvidia_index)
        return self._view

    def is_current(self, path: Path) -> bool:
        """The variant at ``path`` is the CPU view of the same wheel."""
        view = self.locate()
        info = variants.read_info(path, path.name)
        return bool(
            info.source.get("view") == "cpu"
            and info.source.get("wheel_version") == view.wheel.version
            and info.torch == view.torch
        )

    def refusal(self, target: Target) -> UsageError:
        built = installed_build_version(target.path)
        wanted = f"the CPU view of torch {self.locate().wheel.version}"
        return occupied(target, built or "of another build", wanted)

    def populate(self, tree: Path) -> variants.VariantInfo:
        from fdl.paths import cache_dir

        cache = self.cache if self.cache is not None else cache_dir() / "wheels"
        return populate_cpu_view(
            self.locate(), tree, cache, on_line=self.on_message, on_progress=self.on_progress
        )


def install_cpu_view(
    context: Context,
    *,
    cache: Path,
    torch: str | None = None,
    wheel: Path | None = None,
    index_url: str | None = None,
    name: str | None = None,
    force: bool = False,
    activate: bool = True,
    on_message: LineCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> InstallResult:
    """Install the CPU view of a torch wheel (this module's) as
    ``precompiled/<name or cpu>``: the wheel on the index (``torch``, the newest known
    release when None) or a ``.whl`` file, read member by member. ``index_url`` is where
    the wheel and the NVIDIA wheels it pins are found (a file's NVIDIA wheels too).

    An existing view of the same wheel is kept; another build is replaced only with
    ``force``.

    Raises:
        UsageError: no such wheel, or the variant holds another build.
        NetworkError: the index or its file host cannot be read.
    """
    view = FromCpuView(torch, wheel, index_url, cache, on_message, on_progress)
    view.locate()  # the wheel is looked up (or read) before the target
    return install_source(
        context,
        view,
        name=f"precompiled/{name}" if name else None,
        force=force,
        activate=activate,
        on_wait=on_message,
    )
