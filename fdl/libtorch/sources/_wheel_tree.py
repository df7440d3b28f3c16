"""The libtorch tree of a PyTorch wheel: ``torch/{lib,include,share}`` copied out of the
wheel (or a Python environment's torch) without the Python-only parts, with the NVIDIA
libraries a CUDA wheel needs brought into ``lib/`` (:mod:`fdl.libtorch.sources._nvidia`),
and the variant's metadata (:class:`WheelSource`: the wheel, read), by
:meth:`FromWheel.populate` (the ``wheel`` source; :mod:`fdl.libtorch.sources._wheel` reads
the wheel and installs it).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._files import file_sha256
from fdl.archive import safe_extract_zip
from fdl.compat import release
from fdl.errors import FdlError, UsageError
from fdl.libtorch import variants
from fdl.libtorch._install import Target, installed_build_version
from fdl.libtorch.sources import occupied
from fdl.libtorch.sources._generated import write_build_files
from fdl.libtorch.sources._nvidia import (
    NvidiaLibraries,
    copy_environment_libraries,
    copy_wheel_libraries,
    fetch_wheels,
    nvidia_requirements,
)
from fdl.libtorch.sources._pip import Pip
from fdl.runner import Runner

__all__ = ["TREE_DIRS", "FromWheel", "NvidiaOptions", "WheelSource"]

TREE_DIRS = ("lib", "include", "share")
# Python-only parts of torch/lib: the bindings and any extension module.
_PYTHON_ONLY = re.compile(r"^(libtorch_python\.so.*|.*\.cpython-.*\.so|.*\.abi3\.so)$")

LineCallback = Callable[[str], None]


@dataclass(frozen=True)
class WheelSource:
    """Where the torch files come from, and what they are.

    Attributes:
        kind: ``wheel`` (a .whl file; also what pip fetched) or ``environment``.
        location: The .whl file, or the environment's ``torch`` package directory.
        version: The wheel's version (``2.13.0+cpu``).
        cuda: CUDA version the wheel was built with (``13.0``), None for CPU.
        git_version: The PyTorch commit.
        requires: The wheel's ``Requires-Dist`` lines.
        fetched_by: How it was obtained (``pip download torch==2.13.0``), if fdl fetched it.
    """

    kind: str
    location: Path
    version: str
    cuda: str | None
    git_version: str | None
    requires: tuple[str, ...] = ()
    fetched_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def torch_version(self) -> str:
        return self.version.split("+", 1)[0]

    @property
    def variant(self) -> str:
        """``cpu``, ``cu130``: the local version tag, else derived from the CUDA version."""
        local = self.version.partition("+")[2]
        if local:
            return local
        return "cu" + self.cuda.replace(".", "") if self.cuda else "cpu"

    @property
    def build_version(self) -> str:
        return f"{self.torch_version}+{self.variant}"

    @property
    def site_packages(self) -> Path | None:
        return self.location.parent if self.kind == "environment" else None


def _drop_python_only(lib_dir: Path) -> list[str]:
    dropped = []
    for path in sorted(lib_dir.iterdir()):
        if path.is_file() and _PYTHON_ONLY.match(path.name):
            path.unlink()
            dropped.append(path.name)
    return dropped


def _copy_tree(source: WheelSource, tree: Path, scratch: Path) -> None:
    """Put ``torch/{lib,include,share}`` of the source into ``tree``."""
    tree.mkdir(parents=True)
    if source.kind == "environment":  # as it is: no FIFO, device or link out of torch/
        from fdl._files import copy_tree

        for name in TREE_DIRS:
            if (source.location / name).is_dir():
                copy_tree(source.location / name, tree / name, links_inside=True)
        return

    unpacked = scratch / "torch"
    safe_extract_zip(source.location, unpacked, strip_prefix="torch")
    for name in TREE_DIRS:
        if (unpacked / name).is_dir():
            (unpacked / name).rename(tree / name)
    shutil.rmtree(unpacked, ignore_errors=True)


@dataclass(frozen=True)
class NvidiaOptions:
    """How to bring the NVIDIA libraries of a CUDA wheel."""

    bundle: bool = True
    python: str = "python3"
    cache: Path | None = None
    index_url: str | None = None


@dataclass(frozen=True)
class FromWheel:
    """A PyTorch wheel's libtorch (:class:`WheelSource`: a file, an environment's torch or
    pip's download), with the NVIDIA libraries a CUDA wheel needs: the ``wheel`` source.

    Attributes:
        wheel: The wheel, read.
        runner: Runs pip for the NVIDIA wheels.
        nvidia: How the NVIDIA libraries are brought (or not).
        on_message: Told what is being done (a few lines).
        on_line: Gets pip's output and per-wheel progress (many lines).
    """

    wheel: WheelSource
    runner: Runner
    nvidia: NvidiaOptions = field(default_factory=NvidiaOptions)
    on_message: LineCallback | None = None
    on_line: LineCallback | None = None

    kind = "wheel"

    @property
    def default_name(self) -> str:
        return f"precompiled/{self.wheel.variant}"

    def describe(self) -> str:
        wheel = self.wheel
        if wheel.kind == "environment":
            what = f"the torch {wheel.version} installed in {wheel.location.parent}"
        elif wheel.fetched_by:
            what = f"the torch {wheel.version} wheel of {wheel.fetched_by}"
        else:
            what = f"the torch {wheel.version} wheel {wheel.location}"
        if wheel.cuda:
            what += f" {'with' if self.nvidia.bundle else 'without'} its NVIDIA libraries"
        return what

    def is_current(self, path: Path) -> bool:
        return installed_build_version(path) == self.wheel.build_version

    def refusal(self, target: Target) -> UsageError | None:
        """Another build is refused; a tree that says no build (no ``build-version``, no
        metadata) is replaced."""
        found = installed_build_version(target.path)
        return occupied(target, found, self.wheel.build_version) if found else None

    def populate(self, tree: Path) -> variants.VariantInfo:
        """Fill ``tree`` from the wheel and return the variant's metadata."""
        source = self.wheel
        say = self.on_message or (lambda _text: None)
        output = self.on_line or (lambda _text: None)
        scratch = tree.parent / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        say(f"copying torch/{{{','.join(TREE_DIRS)}}} from {source.location}")
        _copy_tree(source, tree, scratch)
        dropped = _drop_python_only(tree / "lib")
        write_build_files(
            tree, source.build_version, source.git_version,
            source=str(source.location), hint="pass another torch wheel",
        )  # fmt: skip
        libraries = None
        if source.cuda and self.nvidia.bundle:
            libraries = _bring_nvidia(
                source, tree / "lib", scratch, self.runner, self.nvidia, say, output
            )
            count = len(libraries.files)
            say(f"brought {count} NVIDIA libraries into lib/ ({libraries.origin})")
        shutil.rmtree(scratch, ignore_errors=True)
        return _info(source, dropped, libraries, self.nvidia)


def _bring_nvidia(
    source: WheelSource,
    lib_dir: Path,
    scratch: Path,
    runner: Runner,
    options: NvidiaOptions,
    say: LineCallback,
    output: LineCallback,
) -> NvidiaLibraries:
    if source.site_packages is not None:
        say(f"copying the NVIDIA libraries from {source.site_packages / 'nvidia'}")
        return copy_environment_libraries(source.site_packages, lib_dir)
    wanted = nvidia_requirements(source.requires)
    if not wanted:
        return NvidiaLibraries("none required", ())
    say(f"fetching NVIDIA wheels with pip: {' '.join(wanted)}")
    cache = options.cache or scratch / "wheels"
    pip = Pip(options.python, runner, options.index_url, output)
    wheels = fetch_wheels(wanted, cache, pip, find_links=[source.location.parent])
    return copy_wheel_libraries(wheels, lib_dir, scratch, on_line=output)


def _info(
    source: WheelSource,
    dropped: Sequence[str],
    libraries: NvidiaLibraries | None,
    options: NvidiaOptions,
) -> variants.VariantInfo:
    cudnn = next(
        (
            r.split("==", 1)[1].split(";")[0].strip()
            for r in source.requires
            if "cudnn" in r and "==" in r
        ),
        None,
    )
    requested: list[str] = []
    try:
        variant = release(source.torch_version).variant(source.variant)
        requested = variant.targets_for(source.torch_version).codes()
        cudnn = cudnn or variant.cudnn
    except FdlError:
        pass  # a release or variant fdl's tables do not know: the binaries still tell
    extra: dict[str, Any] = {"dropped": list(dropped)}
    if source.cuda:
        extra["nvidia_libraries"] = (
            libraries.to_json() if libraries is not None else {"origin": "not bundled"}
        )
        if not options.bundle:
            extra["nvidia_libraries"]["hint"] = (
                "install the nvidia-* wheels and set LD_LIBRARY_PATH"
            )
    if source.kind == "wheel":
        where = {"wheel": str(source.location), "sha256": file_sha256(source.location)}
    else:
        where = {"environment": str(source.location)}
    return variants.VariantInfo(
        name="",
        torch=source.torch_version,
        cuda=source.cuda,
        cudnn=cudnn,
        archs_requested=requested,
        abi=None,
        source={
            "kind": "wheel",
            "variant": source.variant,
            "build_version": source.build_version,
            "wheel_version": source.version,
            "git_version": source.git_version,
            **where,
            **({"fetched_by": source.fetched_by} if source.fetched_by else {}),
        },
        extra=extra,
    )
