"""What images need to know: fdl/data/images/images.yml plus the CUDA facts of the
compatibility tables (image tags, run-time libraries, dlopen lists, injected libraries)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fdl._assets import data_dir
from fdl.errors import UsageError

__all__ = [
    "ROLES",
    "CudaRuntime",
    "IgnoreGroup",
    "ImagesData",
    "User",
    "cuda_base",
    "cuda_runtime",
    "images_data",
]

ROLES = ("runtime", "build", "dev", "builder")


@dataclass(frozen=True)
class User:
    """The non-root account an image runs as."""

    name: str
    uid: int


@dataclass(frozen=True)
class IgnoreGroup:
    """Patterns of the generated .dockerignore, with the reason they are there."""

    reason: str
    patterns: tuple[str, ...]


@dataclass(frozen=True)
class ImagesData:
    """The contents of images.yml."""

    cpu_bases: dict[str, str]
    cuda_flavours: dict[str, dict[str, str]]
    packages: dict[str, tuple[str, ...]]
    users: dict[str, User]
    paths: dict[str, str]
    dlopen_cpu: tuple[str, ...]
    dlopen_cuda: tuple[str, ...]
    dockerignore: tuple[IgnoreGroup, ...]
    build_caches: dict[str, tuple[tuple[str, str], ...]]


def _strings(values: Any) -> tuple[str, ...]:
    return tuple(str(value) for value in values or ())


@functools.cache
def images_data() -> ImagesData:
    """Load the table once."""
    import yaml

    raw: dict[str, Any] = yaml.safe_load(
        (data_dir() / "images" / "images.yml").read_text(encoding="utf-8")
    )
    bases = raw["bases"]
    return ImagesData(
        cpu_bases={str(k): str(v) for k, v in bases["cpu"].items()},
        cuda_flavours={
            str(role): {str(k): str(v) for k, v in flavours.items()}
            for role, flavours in bases["cuda_flavours"].items()
        },
        packages={str(k): _strings(v) for k, v in raw["packages"].items()},
        users={str(k): User(str(v["name"]), int(v["uid"])) for k, v in raw["users"].items()},
        paths={str(k): str(v) for k, v in raw["paths"].items()},
        dlopen_cpu=_strings(raw["dlopen_libtorch"]["cpu"]),
        dlopen_cuda=_strings(raw["dlopen_libtorch"]["cuda"]),
        dockerignore=tuple(
            IgnoreGroup(str(group["reason"]), _strings(group["patterns"]))
            for group in raw["dockerignore"]
        ),
        build_caches={
            str(tool): tuple((str(m["id"]), str(m["target"])) for m in mounts)
            for tool, mounts in raw["build_caches"].items()
        },
    )


def cuda_base(cuda: str, role: str, *, cudnn: bool) -> str | None:
    """The ``nvidia/cuda`` image for a CUDA version and role, None when the tables do
    not know the version (``12.8`` -> ``nvidia/cuda:12.8.1-runtime-ubuntu24.04``)."""
    from fdl.compat.cuda import image_tag

    flavour = images_data().cuda_flavours[role]["cudnn" if cudnn else "plain"]
    try:
        return image_tag(cuda, flavour)
    except UsageError:
        return None


@dataclass(frozen=True)
class CudaRuntime:
    """What a slim image of a program built against a libtorch needs to know.

    Attributes:
        dlopen: Libraries loaded with dlopen (globs): copied with their closure.
        shared: CUDA libraries an nvidia/cuda base may provide (globs): taken from
            the base when its ld.so.cache has the soname.
        never_ship: Injected by the NVIDIA container runtime: never copied.
    """

    dlopen: tuple[str, ...]
    shared: tuple[str, ...]
    never_ship: tuple[str, ...]


def cuda_runtime(cuda: str | None) -> CudaRuntime:
    """The run-time facts for a variant built for ``cuda`` (None: CPU).

    Raises:
        UsageError: the tables know no run-time libraries for that CUDA major.
    """
    from fdl.compat.runtime import injected_libraries, runtime_libraries

    never_ship = tuple(sorted(injected_libraries()))
    if cuda is None:
        return CudaRuntime(images_data().dlopen_cpu, (), never_ship)
    libraries = runtime_libraries(cuda)
    dlopen = sorted(
        {pattern for lib in libraries for pattern in lib.dlopened} | set(images_data().dlopen_cuda)
    )
    shared = sorted({name for lib in libraries if not lib.system for name in lib.all_sonames})
    return CudaRuntime(tuple(dlopen), tuple(shared), never_ship)
