"""NVIDIA run-time libraries for a libtorch made from a CUDA PyTorch wheel.

A CUDA wheel does not contain cuBLAS, cuDNN & co.: its ``Requires-Dist`` names NVIDIA's
wheels (``nvidia-cudnn-cu13==9.24.0.43``, or the ``cuda-toolkit[cublas,...]`` meta package),
and its libraries find them through RPATH ``$ORIGIN/../../nvidia/...`` inside a Python
environment. To make the variant self-contained, the libraries of those wheels are copied
into the variant's ``lib/``, which the same RPATH also searches (``$ORIGIN``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fdl.archive import ZipMember, safe_extract_zip
from fdl.compat import runtime_libraries
from fdl.errors import EnvironmentProblem, NetworkError, UsageError
from fdl.formats.ranged import RangedReader, RemoteWheel
from fdl.formats.wheel import canonical, dist_info_member, exact_pins, newest_pinned, parse_metadata
from fdl.net import IndexFile, index_files
from fdl.runner import Runner

__all__ = [
    "NvidiaLibraries",
    "bring_view_libraries",
    "copy_environment_libraries",
    "copy_wheel_libraries",
    "dist_info",
    "fetch_wheels",
    "needed_elsewhere",
    "nvidia_requirements",
    "pip_saved_files",
]

# Distributions whose wheels carry NVIDIA's run-time libraries (or name the ones that do).
_PREFIXES = ("nvidia-", "cuda-toolkit")

LineCallback = Callable[[str], None]


@dataclass(frozen=True)
class NvidiaLibraries:
    """What was brought into the variant.

    Attributes:
        origin: Where they came from (``wheels`` or the environment's site-packages).
        packages: (distribution file or directory, copied library names).
    """

    origin: str
    packages: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def files(self) -> list[str]:
        return sorted({name for _, names in self.packages for name in names})

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "packages": [
                {"from": source, "libraries": list(names)} for source, names in self.packages
            ],
        }


def nvidia_requirements(requires: Iterable[str]) -> list[str]:
    """The NVIDIA requirements of a torch wheel that apply to this machine, without markers.

    ``cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"`` ->
    ``cuda-toolkit[cublas,cudart]==13.0.3``.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    result = []
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if not requirement.name.lower().startswith(_PREFIXES):
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        result.append(f"{requirement.name}{extras}{requirement.specifier}")
    return result


def pip_saved_files(output: str) -> list[Path]:
    """The files ``pip download`` reports as saved or already present."""
    found = []
    for line in output.splitlines():
        text = line.strip()
        for prefix in ("Saved ", "File was already downloaded "):
            if text.startswith(prefix):
                found.append(Path(text[len(prefix) :].strip()))
    return found


def fetch_wheels(
    requirements: Sequence[str],
    dest: Path,
    *,
    python: str,
    runner: Runner,
    find_links: Sequence[Path] = (),
    index_url: str | None = None,
    on_line: LineCallback | None = None,
) -> list[Path]:
    """``pip download`` the NVIDIA wheels (with their NVIDIA dependencies) into ``dest``.

    Raises:
        CommandFailed: pip could not resolve or fetch them (the message has pip's tail).
    """
    dest.mkdir(parents=True, exist_ok=True)
    argv = [python, "-m", "pip", "download", "--only-binary=:all:", "--progress-bar", "off"]
    argv += ["--dest", str(dest)]
    for directory in find_links:
        argv += ["--find-links", str(directory)]
    if index_url:
        argv += ["--index-url", index_url]
    from fdl.libtorch.sources._pip import pip_download

    result = pip_download(
        runner,
        [*argv, *requirements],
        what="the NVIDIA libraries (" + ", ".join(requirements) + ")",
        index_url=index_url,
        on_line=on_line,
    )
    saved = pip_saved_files(result.stdout)
    wheels = [p for p in saved if p.name.startswith("nvidia_") and p.suffix == ".whl"]
    if not wheels:  # pip's tail may have scrolled past its "Saved" lines
        wheels = sorted(dest.glob("nvidia_*.whl"))
    return wheels


def _is_library(path: Path) -> bool:
    return path.is_file() and ".so" in path.name


def _copy_libraries(source_dirs: Iterable[Path], lib_dir: Path) -> tuple[str, ...]:
    copied = []
    for directory in source_dirs:
        for path in sorted(directory.iterdir()):
            if not _is_library(path) or (lib_dir / path.name).exists():
                continue  # torch's own file wins; one copy of each soname
            shutil.copy2(path, lib_dir / path.name)
            copied.append(path.name)
    return tuple(copied)


def copy_wheel_libraries(
    wheels: Sequence[Path], lib_dir: Path, scratch: Path, on_line: LineCallback | None = None
) -> NvidiaLibraries:
    """Extract each NVIDIA wheel (safely) and copy its ``nvidia/*/lib`` libraries to ``lib_dir``."""
    packages = []
    for index, wheel in enumerate(sorted(wheels)):
        if on_line is not None:
            on_line(f"unpacking {wheel.name}")
        unpacked = scratch / f"nvidia-{index}"
        safe_extract_zip(wheel, unpacked, strip_prefix="nvidia")
        copied = _copy_libraries(sorted(unpacked.glob("*/lib")), lib_dir)
        shutil.rmtree(unpacked, ignore_errors=True)
        if copied:
            packages.append((wheel.name, copied))
    return NvidiaLibraries("wheels", tuple(packages))


def copy_environment_libraries(site_packages: Path, lib_dir: Path) -> NvidiaLibraries:
    """Copy the libraries of the NVIDIA packages installed beside torch.

    Raises:
        EnvironmentProblem: the environment has no ``nvidia/`` packages.
    """
    root = site_packages / "nvidia"
    if not root.is_dir():
        raise EnvironmentProblem(
            f"{site_packages} has no NVIDIA packages (no nvidia/ directory) for this CUDA torch",
            hint="install torch with its dependencies in that environment, or pass --no-nvidia "
            "to record the variant without them",
        )
    packages = []
    for directory in sorted(root.glob("*/lib")):
        copied = _copy_libraries([directory], lib_dir)
        if copied:
            packages.append((str(directory), copied))
    return NvidiaLibraries(str(root), tuple(packages))


# -- the CPU view's NVIDIA libraries, read from their wheels on the index ----------------


class ViewFacts(Protocol):
    """What :func:`bring_view_libraries` reads of a CPU view (a ``CpuView``), and its
    ``nvidia`` list, which it extends with (NVIDIA wheel file name, sonames taken)."""

    wheel: RemoteWheel
    wheel_cuda: str | None
    requires: tuple[str, ...]
    torch: str
    nvidia: list[tuple[str, list[str]]]

    @property
    def nvidia_from(self) -> str | None: ...


def dist_info(members: dict[str, ZipMember], name: str) -> ZipMember:
    """The wheel's ``.dist-info/<name>`` member.

    Raises:
        EnvironmentProblem: it has none.
    """
    found = dist_info_member(members, name)
    if found is not None:
        return members[found]
    raise EnvironmentProblem(
        f"the wheel has no .dist-info/{name}: not a wheel pip would install either",
        hint="pass another torch release (--torch) or another index (--index-url)",
    )


def needed_elsewhere(lib_dir: Path, cuda: str | None) -> set[str]:
    """Sonames the view's libraries need that the view does not hold: those neither the
    view nor the system provides, and the NVIDIA runtime libraries of the wheel's CUDA
    wherever they are found (a CUDA toolkit in ld.so.conf): the view holds them from their
    wheels, so that it is the same tree whichever machine made it."""
    from fdl.binaries import dependency_closure
    from fdl.compat import injected_libraries

    try:
        nvidia = [lib for lib in runtime_libraries(cuda) if lib.wheel] if cuda else []
    except UsageError:  # a CUDA fdl has no table for: bring_view_libraries says so if needed
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


def bring_view_libraries(
    view: ViewFacts,
    reader: RangedReader,
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
    pins = exact_pins(view.requires, machine=machine)
    by_wheel: dict[tuple[str, str], list[str]] = {}
    unknown = []
    for soname in sorted(sonames):
        library = next(
            (lib for lib in runtime_libraries(view.wheel_cuda) if lib.matches(soname)), None
        )
        project = canonical(library.wheel) if library and library.wheel else None
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


def _toolkit_pins(view: ViewFacts, reader: RangedReader, machine: str) -> dict[str, str]:
    """The pins of the ``cuda-toolkit[...]==V`` meta package a torch wheel requires (CUDA
    13 wheels name their NVIDIA wheels through it), read from its wheel's METADATA."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in view.requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonical(requirement.name) != "cuda-toolkit":
            continue
        files = index_files("cuda-toolkit", view.nvidia_from)
        wheel = _pinned_wheel(files, "cuda-toolkit", str(requirement.specifier), machine)
        text = reader.small(wheel, dist_info(reader.members(wheel), "METADATA"))
        requires = parse_metadata(text.decode("utf-8", "replace")).requires
        return exact_pins(requires, requirement.extras, machine=machine)
    return {}


def _pinned_wheel(files: list[IndexFile], project: str, pin: str, machine: str) -> RemoteWheel:
    """The newest wheel of ``project`` that ``pin`` allows, for Linux on ``machine`` (or
    for any platform).

    Raises:
        NetworkError: the index lists none.
    """
    best = newest_pinned(files, project, pin, machine)
    if best is None:
        raise NetworkError(
            f"the index lists no Linux {machine} wheel of {project}{pin}",
            hint="pass an index that mirrors NVIDIA's wheels too (--index-url)",
        )
    return RemoteWheel(best.filename, best.url, best.sha256, best.size)
