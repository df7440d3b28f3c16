"""The images table (fdl/data/images/images.yml), loaded once and queried by role."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fdl._assets import data_dir

__all__ = [
    "IgnoreGroup",
    "ImagesData",
    "User",
    "cuda_base",
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
    cuda_repository: str
    cuda_os: str
    cuda_versions: dict[str, str]
    cuda_flavours: dict[str, dict[str, str]]
    packages: dict[str, tuple[str, ...]]
    users: dict[str, User]
    paths: dict[str, str]
    dlopen_cpu: tuple[str, ...]
    dlopen_cuda: dict[str, tuple[str, ...]]
    never_ship: tuple[str, ...]
    reuse_from_base: tuple[str, ...]
    dockerignore: tuple[IgnoreGroup, ...]

    def dlopen(self, cuda: str | None) -> tuple[str, ...]:
        """Libraries loaded with dlopen that a variant for ``cuda`` (None: CPU) may need."""
        if cuda is None:
            return self.dlopen_cpu
        return self.dlopen_cuda.get(cuda.split(".")[0], ())


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
    cuda = bases["cuda"]
    return ImagesData(
        cpu_bases={str(k): str(v) for k, v in bases["cpu"].items()},
        cuda_repository=str(cuda["repository"]),
        cuda_os=str(cuda["os"]),
        cuda_versions={str(k): str(v) for k, v in cuda["versions"].items()},
        cuda_flavours={
            str(role): {str(k): str(v) for k, v in flavours.items()}
            for role, flavours in cuda["flavours"].items()
        },
        packages={str(k): _strings(v) for k, v in raw["packages"].items()},
        users={str(k): User(str(v["name"]), int(v["uid"])) for k, v in raw["users"].items()},
        paths={str(k): str(v) for k, v in raw["paths"].items()},
        dlopen_cpu=_strings(raw["dlopen"]["cpu"]),
        dlopen_cuda={str(k): _strings(v) for k, v in raw["dlopen"]["cuda"].items()},
        never_ship=_strings(raw["never_ship"]),
        reuse_from_base=_strings(raw["reuse_from_base"]),
        dockerignore=tuple(
            IgnoreGroup(str(group["reason"]), _strings(group["patterns"]))
            for group in raw["dockerignore"]
        ),
    )


def cuda_base(cuda: str, role: str, *, cudnn: bool) -> str | None:
    """The ``nvidia/cuda`` image for a CUDA version and role, None when the table
    does not know the version (``12.8`` -> ``nvidia/cuda:12.8.1-runtime-ubuntu24.04``)."""
    data = images_data()
    major_minor = ".".join(cuda.split(".")[:2])
    version = data.cuda_versions.get(major_minor)
    if version is None:
        return None
    flavour = data.cuda_flavours[role]["cudnn" if cudnn else "plain"]
    return f"{data.cuda_repository}:{version}-{flavour}-{data.cuda_os}"
