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

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._grammar import FACTS
from fdl.archive import ZipMember
from fdl.binaries import BinaryFormatError, read_dynamic
from fdl.errors import EnvironmentProblem, NetworkError, UsageError
from fdl.formats.ranged import DAMAGED_HINT, RangedReader, RemoteWheel
from fdl.formats.wheel import (
    build_number,
    parse_metadata,
    parse_record,
    parse_version_py,
    parse_wheel_name,
    version_key,
)
from fdl.libtorch import variants
from fdl.libtorch._install import InstallResult, Target, installed_build_version
from fdl.libtorch.sources import install_source, occupied
from fdl.libtorch.sources._generated import (
    LINK_SCRIPT_MARK,
    check_wheel_facts,
    write_build_files,
    write_cmake_package,
    write_link_script,
)
from fdl.libtorch.sources._view_nvidia import bring_view_libraries, dist_info, needed_elsewhere
from fdl.net import IndexFile, Progress, index_files
from fdl.paths import Context

__all__ = [
    "CORE_LIBRARIES",
    "LINK_SCRIPT_MARK",
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
# The wheel the view reads (a name the tests and callers know it by).
ViewWheel = RemoteWheel


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
        found = parse_wheel_name(item.filename)
        if found is None or found.name != "torch" or item.yanked:
            continue
        version = found.version
        if FACTS["torch-version"].first_refused(version) is None:  # named in the refusal
            versions.add(version.split("+", 1)[0])
        if version.split("+", 1)[0] != torch or not found.for_linux(machine):
            continue
        fitting.append(item)
    if not fitting:
        known = sorted(versions, key=version_key)[-5:]
        raise UsageError(
            f"the index lists no Linux {machine} wheel of torch {torch}"
            + (f" (its newest: {', '.join(known)})" if known else ""),
            hint="pass a release it has (--torch), or another index (--index-url)",
        )
    # a +cpu build first; then the highest build tag (a re-upload), as pip prefers it
    best = min(
        fitting, key=lambda f: ("+cpu" not in f.filename, -build_number(f.filename), f.filename)
    )
    return ViewWheel(best.filename, best.url, best.sha256, best.size)


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
    reader = RangedReader(cache / "ranges", on_progress)
    return _populate(view, reader, tree, machine, say)


def _populate(
    view: CpuView, reader: RangedReader, tree: Path, machine: str, say: LineCallback
) -> variants.VariantInfo:
    say(f"reading the zip directory of {view.wheel.filename}")
    members = reader.members(view.wheel)
    _read_metadata(view, reader, members)
    tree.mkdir(parents=True, exist_ok=True)
    record = _record(reader.small(view.wheel, dist_info(members, "RECORD")))

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
    nvidia = needed_elsewhere(tree / "lib", view.wheel_cuda)
    if nvidia:
        bring_view_libraries(view, reader, nvidia, tree / "lib", machine, say)
    if cuda_build:
        write_cmake_package(tree, view.build_version, view.torch, **_FILL)
        write_link_script(tree / "lib", view.build_version, **_FILL)
    write_build_files(tree, view.build_version, view.git_version, **_FILL)
    view.bytes_read += reader.bytes_read
    view.bytes_cached += reader.bytes_cached
    return _info(view)


def _mib(members: Iterable[ZipMember]) -> str:
    return f"{sum(m.compressed for m in members) / (1 << 20):.1f}"


def _kept(name: str, whole_cmake: bool) -> bool:
    """Headers, and of the CMake files the version file (a CPU wheel's: all of them)."""
    if name.endswith("/"):
        return False
    if whole_cmake and name.startswith("torch/share/cmake/"):
        return True
    return name.startswith(_INCLUDE) or name == _CMAKE + "TorchConfigVersion.cmake"


def _destination(member: ZipMember) -> str:
    return member.name.removeprefix("torch/")


def _read_metadata(view: CpuView, reader: RangedReader, members: dict[str, ZipMember]) -> None:
    metadata = reader.small(view.wheel, dist_info(members, "METADATA"))
    headers = parse_metadata(metadata.decode("utf-8", "replace"))
    if (headers.name or "").lower() != "torch":
        raise UsageError(
            f"{view.wheel.filename} is not a PyTorch wheel (its name is {headers.name!r})",
            hint="pass a torch wheel",
        )
    view.requires = headers.requires
    version_py = members.get("torch/version.py")
    values: dict[str, str | None] = {}
    if version_py is not None:
        values = parse_version_py(reader.small(view.wheel, version_py).decode("utf-8", "replace"))
    view.wheel_cuda = values.get("cuda") or None
    view.git_version = values.get("git_version") or None
    _check_facts(view)


def _check_facts(view: CpuView) -> None:
    """The wheel's version (its file name's) and ``version.py``'s CUDA and commit, held
    against their grammars before any of them is written into the variant: index text
    never becomes CMake or linker-script code."""
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
    check_wheel_facts(
        view.wheel.version, view.wheel_cuda, view.git_version,
        source=source, hint=hint, release=view.torch, error=error,
    )  # fmt: skip


def _record(text: bytes) -> dict[str, tuple[str, int]]:
    """The wheel's RECORD: member -> (sha256 as hex, size) (:func:`parse_record`)."""
    return parse_record(text, hint=DAMAGED_HINT)


def _library_closure(
    view: CpuView,
    reader: RangedReader,
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
                found, index = local_wheel(Path(os.path.expanduser(self.wheel))), None
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
