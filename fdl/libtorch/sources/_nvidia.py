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
from typing import Any

from fdl.archive import safe_extract_zip
from fdl.errors import EnvironmentProblem
from fdl.libtorch.sources._pip import Pip

__all__ = [
    "NvidiaLibraries",
    "copy_environment_libraries",
    "copy_wheel_libraries",
    "fetch_wheels",
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
    requirements: Sequence[str], dest: Path, pip: Pip, *, find_links: Sequence[Path] = ()
) -> list[Path]:
    """``pip download`` the NVIDIA wheels (with their NVIDIA dependencies) into ``dest``.

    Raises:
        CommandFailed: pip could not resolve or fetch them (the message has pip's tail).
    """
    result = pip.download(
        requirements,
        dest,
        what="the NVIDIA libraries (" + ", ".join(requirements) + ")",
        options=[arg for directory in find_links for arg in ("--find-links", str(directory))],
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
