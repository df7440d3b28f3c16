"""The active libtorch variant and the variables that point builds at it.

Layout (as floDl lays it out): ``<root>/libtorch/.active`` holds the variant's
path relative to ``<root>/libtorch`` (``precompiled/cu128``); the variant
directory has ``lib/``, ``include/``, ``share/`` and a ``.arch`` file of
``key=value`` lines (``cuda=12.8``, ``torch=2.10.0``, ``archs=...``,
``source=...``). ``<root>`` is :func:`fdl.paths.resolve_context` of the
project's root manifest directory.

:func:`active_libtorch` is the one function that reads this; the libtorch
feature may later replace what it reads without touching its callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.tasks._env import EnvChange

__all__ = [
    "LibtorchState",
    "Variant",
    "active_libtorch",
    "compose_variables",
    "nccl_exports",
    "read_variant",
    "variant_exports",
]

CPU_VARIANT = "precompiled/cpu"


@dataclass(frozen=True)
class Variant:
    """One installed libtorch.

    Attributes:
        name: Path relative to the libtorch directory (``precompiled/cu128``).
        path: Absolute directory on the host.
        cuda: CUDA version (``12.8``), None for CPU builds or when unknown.
        torch: libtorch version, when known.
        archs: GPU architectures it was built for.
        source: ``precompiled``, ``compiled``, ... when known.
        abi: ``cxx11`` or ``pre-cxx11`` (the C++ library ABI of its binaries), when known.
        vendor: ``cpu``, ``nvidia`` or ``amd`` (:attr:`fdl.libtorch.variants.VariantInfo.vendor`),
            None when neither its metadata nor its name says.
    """

    name: str
    path: Path
    cuda: str | None = None
    torch: str | None = None
    archs: tuple[str, ...] = ()
    source: str | None = None
    abi: str | None = None
    vendor: str | None = None


@dataclass(frozen=True)
class LibtorchState:
    """What the project's libtorch directory says.

    Attributes:
        directory: The libtorch directory (``<root>/libtorch``).
        active: The active variant, if one is set and installed.
        problem: Why there is no active variant although ``.active`` names one.
    """

    directory: Path
    active: Variant | None
    problem: str | None = None


def read_variant(directory: Path, name: str) -> Variant:
    """The variant ``name`` under the libtorch ``directory``.

    Reads what :mod:`fdl.libtorch.variants` recorded (``variant.json``, else
    the reference's ``.arch`` file).
    """
    from fdl.libtorch.variants import read_info

    path = directory / name
    info = read_info(path, name)
    archs = info.archs_found.get("cubin") or info.archs_requested
    return Variant(
        name=name,
        path=path,
        cuda=info.cuda,
        torch=info.torch,
        archs=tuple(archs),
        source=info.source.get("kind") or None,
        abi=info.abi,
        vendor=info.vendor,
    )


def active_libtorch(project_dir: Path, environ: Mapping[str, str]) -> LibtorchState:
    """The active libtorch variant of the project at ``project_dir``."""
    from fdl.errors import UsageError
    from fdl.paths import resolve_context

    context = resolve_context(project_dir, environ)
    directory = context.libtorch_dir
    from fdl._files import NotARegularFile, read_small_text

    try:
        raw = (read_small_text(directory / ".active", limit=4096) or "").strip()
    except NotARegularFile as exc:
        return LibtorchState(directory, None, f"libtorch/.active {exc.reason}")
    except OSError:
        return LibtorchState(directory, None)
    if not raw:
        return LibtorchState(directory, None)
    from fdl.libtorch import variants

    try:
        name = variants.validate_name(raw)
    except UsageError:
        return LibtorchState(
            directory, None, f"{directory / '.active'} names {raw!r}, which is not a variant path"
        )
    if not (directory / name / "lib").is_dir():
        return LibtorchState(
            directory, None, f"libtorch/.active names {name}, but {directory / name}/lib is missing"
        )
    return LibtorchState(directory, read_variant(directory, name))


def _cuda_changes(cuda: str | None) -> list[EnvChange]:
    if not cuda:
        return []
    parts = cuda.split(".")
    full = ".".join([*parts, *["0"] * (3 - len(parts))]) if len(parts) < 3 else cuda
    return [EnvChange("CUDA_VERSION", full), EnvChange("CUDA_TAG", ".".join(parts[:2]))]


# tch's build script compiles its C++ with -D_GLIBCXX_USE_CXX11_ABI=$LIBTORCH_CXX11_ABI
# (default 1); CMake projects get the flag from TorchConfig.cmake's TORCH_CXX_FLAGS.
_ABI_FLAG = {"cxx11": "1", "pre-cxx11": "0"}


def variant_exports(
    location: str, variant: Variant, *, rocm_lib: str | None = None
) -> list[EnvChange]:
    """The variables a process needs to build and run against ``variant``: where each
    framework looks for libtorch (``LIBTORCH`` tch-rs, ``LIBTORCH_PATH`` floDl,
    ``Torch_DIR``/``CMAKE_PREFIX_PATH`` CMake), the loader path, and the C++ ABI of its
    binaries (``LIBTORCH_CXX11_ABI``, tch-rs). No ``LIBTORCH_BYPASS_VERSION_CHECK``: the
    variant is the release the framework checks for (``fdl setup`` installs it).

    Args:
        location: Where the process sees the variant (a host path, or the
            path inside a container).
        variant: The variant (for its CUDA version and ABI).
        rocm_lib: The ROCm runtime's library directory where the process runs: for an AMD
            variant it goes **before** the variant's ``lib/`` (libtorch's ROCm build bundles
            a ROCm user space; loaded before the machine's, it "segfaults at the first GPU
            op": flodl-cli 0.8.0 src/libtorch/detect.rs:207-300, fdl/data/compat/rocm.yaml).
    """
    abi = _ABI_FLAG.get(variant.abi or "")
    loader = f"{location}/lib"
    if variant.vendor == "amd" and rocm_lib:
        loader = f"{rocm_lib}:{loader}"
    return [
        EnvChange("LIBTORCH", location),
        EnvChange("LIBTORCH_PATH", location),
        EnvChange("Torch_DIR", f"{location}/share/cmake/Torch"),
        EnvChange("LD_LIBRARY_PATH", loader, prepend=True),
        EnvChange("CMAKE_PREFIX_PATH", location, prepend=True),
        *([EnvChange("LIBTORCH_CXX11_ABI", abi)] if abi else []),
        *_cuda_changes(variant.cuda),
    ]


def nccl_exports(state: LibtorchState) -> list[EnvChange]:
    """``LD_PRELOAD`` and ``LD_LIBRARY_PATH`` for the NCCL ``fdl nccl build`` made for the
    active variant (``libtorch/nccl/builds/``), when one was; nothing otherwise.

    Preloaded as floDl wires it (``worker.env.LD_PRELOAD``): libtorch_cuda.so's own NCCL
    symbols then resolve to the build with code for every GPU of the rig. Host commands
    only: a container does not see the build directory.
    """
    if state.active is None:
        return []
    from fdl.nccl import built_for

    build = built_for(state.directory, state.active.name)
    if build is None:
        return []
    return [
        EnvChange("LD_LIBRARY_PATH", str(build.library.parent), prepend=True),
        EnvChange("LD_PRELOAD", str(build.library), prepend=True),
    ]


def compose_variables(state: LibtorchState) -> list[EnvChange]:
    """Host paths for compose files to mount (``${LIBTORCH_HOST_PATH}``, ...;
    ``${LIBTORCH_CUDA_PATH}`` only when the active variant is a CUDA build).

    floDl's compose files mount ``${LIBTORCH_HOST_PATH:-./libtorch/precompiled/cu128}``
    and ``${LIBTORCH_CPU_PATH:-...}`` and build with ``${CUDA_VERSION}``/``${CUDA_TAG}``.
    """
    changes = [EnvChange("LIBTORCH_CPU_PATH", str(state.directory / CPU_VARIANT))]
    if state.active is not None:
        changes.insert(0, EnvChange("LIBTORCH_HOST_PATH", str(state.active.path)))
        if state.active.cuda:
            # only for a CUDA build: the mount of a dev profile with `follow-active: true`
            # (`${LIBTORCH_CUDA_PATH:-<its variant>}`), never a CPU one
            changes.insert(1, EnvChange("LIBTORCH_CUDA_PATH", str(state.active.path)))
        changes.extend(_cuda_changes(state.active.cuda))
    return changes
