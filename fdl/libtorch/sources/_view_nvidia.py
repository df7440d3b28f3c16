"""The NVIDIA libraries of a CPU view (:mod:`fdl.libtorch.sources._cpu_view`), read from
their wheels on the index: which sonames the view's libraries need that it does not hold,
and, for each, the member of the NVIDIA wheel the torch wheel pins (directly or through
the ``cuda-toolkit`` meta package), read by HTTP Range like the torch wheel's own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from fdl.archive import ZipMember
from fdl.compat import runtime_libraries
from fdl.errors import EnvironmentProblem, NetworkError, UsageError
from fdl.formats.ranged import RangedReader, RemoteWheel
from fdl.formats.wheel import canonical, dist_info_member, exact_pins, newest_pinned, parse_metadata
from fdl.net import IndexFile, index_files

__all__ = ["ViewFacts", "bring_view_libraries", "dist_info", "needed_elsewhere"]

LineCallback = Callable[[str], None]


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
