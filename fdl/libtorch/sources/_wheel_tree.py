"""The libtorch tree of a PyTorch wheel: ``torch/{lib,include,share}`` copied out of the
wheel (or a Python environment's torch) without the Python-only parts, with the NVIDIA
libraries a CUDA wheel needs brought into ``lib/`` (:mod:`fdl.libtorch.sources._nvidia`),
and the variant's metadata (:class:`WheelSource`: the wheel, read). :class:`~fdl.libtorch.sources._wheel.FromWheel` populates
through :func:`populate_from_wheel`.
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
from fdl.errors import FdlError
from fdl.libtorch import variants
from fdl.libtorch.sources._generated import write_build_files
from fdl.libtorch.sources._nvidia import (
    NvidiaLibraries,
    copy_environment_libraries,
    copy_wheel_libraries,
    fetch_wheels,
    nvidia_requirements,
)
from fdl.runner import Runner

__all__ = ["TREE_DIRS", "NvidiaOptions", "WheelSource", "populate_from_wheel"]

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


def populate_from_wheel(
    source: WheelSource,
    tree: Path,
    runner: Runner,
    nvidia: NvidiaOptions,
    on_line: LineCallback | None = None,
    on_output: LineCallback | None = None,
) -> variants.VariantInfo:
    """Fill ``tree`` from the wheel and return the variant's metadata.

    Args:
        on_line: Told what is being done (a few lines).
        on_output: Gets pip's output and per-wheel progress (many lines).
    """
    say = on_line or (lambda _text: None)
    output = on_output or (lambda _text: None)
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
    if source.cuda and nvidia.bundle:
        libraries = _bring_nvidia(source, tree / "lib", scratch, runner, nvidia, say, output)
        count = len(libraries.files)
        say(f"brought {count} NVIDIA libraries into lib/ ({libraries.origin})")
    shutil.rmtree(scratch, ignore_errors=True)
    return _info(source, dropped, libraries, nvidia)


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
    wheels = fetch_wheels(
        wanted,
        cache,
        python=options.python,
        runner=runner,
        find_links=[source.location.parent],
        index_url=options.index_url,
        on_line=output,
    )
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
