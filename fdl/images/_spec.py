"""What an image is made of, once the manifest and the variant are resolved.

The planner (:mod:`fdl.images._plan`) turns an ``images:`` profile into an
:class:`ImageSpec`; the renderer turns a spec into a Dockerfile and the
executors build, measure and run it. Every collection is a sorted tuple so
that rendering is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fdl.images._data import User

__all__ = [
    "KINDS",
    "ImageSpec",
    "MountSpec",
    "SecretSpec",
    "VariantRef",
]

KINDS = ("dev", "train", "builder")


@dataclass(frozen=True)
class VariantRef:
    """The libtorch variant an image is built against.

    Attributes:
        name: ``precompiled/cpu``, ``builds/sm61-sm120``...
        directory: Where it is installed on this machine (None: not installed here).
        torch: The PyTorch version, when known.
        cuda: The CUDA version, None for CPU.
        cudnn: Whether it uses cuDNN.
        archs: The GPU archs it contains (``sm_86``...; ``gfx90a``... for a ROCm build), sorted.
        image: The stable name of the image fdl makes from it (the Dockerfile's
            default for ``LIBTORCH_IMAGE``).
        pinned: Named by the profile (True) rather than the active variant (False):
            the compose file then mounts exactly it, whatever is active.
        vendor: The GPU stack it targets (``cpu``, ``nvidia``, ``amd``;
            :func:`fdl.compat.vendors.vendor_of_variant`).
    """

    name: str
    directory: Path | None
    torch: str | None
    cuda: str | None
    cudnn: bool
    archs: tuple[str, ...]
    image: str
    pinned: bool = False
    vendor: str = "cpu"

    @property
    def slug(self) -> str:
        """``precompiled/cpu`` -> ``precompiled-cpu`` (for tags and cache ids)."""
        return self.name.replace("/", "-").lower()


@dataclass(frozen=True)
class MountSpec:
    """A directory of the project mounted into a training container.

    Attributes:
        source: The host path as written (relative to the project, or absolute).
        target: The absolute path in the container.
        read_only: Mounted read-only (data) or writable (outputs).
    """

    source: str
    target: str
    read_only: bool


@dataclass(frozen=True)
class SecretSpec:
    """A build secret: a BuildKit secret mount, never a layer or a build argument.

    The build command reads it from ``/run/secrets/<id>``.
    """

    id: str
    env: str | None = None
    file: str | None = None


@dataclass(frozen=True)
class ImageSpec:
    """One image profile, resolved.

    Attributes:
        profile: The profile's name under ``images:``.
        kind: ``dev``, ``train`` or ``builder``.
        project: The project's name (its directory), used in tags and cache ids.
        tag: The image name to build.
        base: The base of the final stage.
        build_base: The base of the build stage (train images).
        variant: The libtorch variant (None for builder images).
        libtorch: How libtorch gets in: ``mounted`` (dev, at run time), ``baked``
            (dev, the whole variant), ``closure`` (train, only the libraries the
            program loads) or ``none`` (builder).
        packages: System packages of the final stage.
        build_packages: System packages of the build stage.
        env: Environment of the final stage.
        build_env: Environment of the build stage (train): TORCH_CUDA_ARCH_LIST from
            the variant's archs, since no GPU can be detected while building.
        build_command: How the build stage builds the program (train).
        build_dir: The build directory (kept out of the build context).
        program: The built program, relative to the project (train).
        args: Default arguments of the program.
        files: Further project paths the training image carries (under the app dir).
        user: The non-root account.
        workdir: The working directory.
        labels: OCI and fdl labels.
        dlopen: Libraries the program loads with dlopen (shell globs).
        never_ship: Libraries never copied (injected by the NVIDIA runtime).
        reuse_from_base: Libraries (globs) taken from the runtime base when it has
            the same soname (CUDA libraries of an nvidia/cuda base).
        strip: Strip symbol tables from the program and its libraries.
        mounts: Project directories mounted by ``fdl image run``.
        pass_env: Host variables passed to ``fdl image run`` containers.
        secrets: Build secrets of the build step.
        gpus: ``auto``, ``all``, ``none`` or a ``--gpus`` value.
        shm_size: ``/dev/shm`` size for runs.
        paths: Fixed paths in the image (``libtorch``, ``app``).
        source: The manifest files it comes from (``fdl.yml + fdl.ci.yml``).
        fdl_version: The fdl that planned it.
        follow_active: A mounted dev profile mounts the active variant when it is a
            CUDA build, its pinned ``variant`` otherwise (``follow-active: true``).
        context: The build context, relative to the project (``.``: the project).
        setup: Shell commands run as root after the system packages (dev images; the
            build stage of train images), e.g. installing a toolchain apt lacks.
        toolchain: Where a train image's cargo build gets Rust: ``setup`` (what
            ``setup:`` installs, rustup in fdl's templates) or ``host`` (this machine's
            toolchain and the crates vendored here, mounted into the build step).
    """

    profile: str
    kind: str
    project: str
    tag: str
    base: str
    build_base: str | None
    variant: VariantRef | None
    libtorch: str
    packages: tuple[str, ...]
    build_packages: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    build_env: tuple[tuple[str, str], ...]
    build_command: str | None
    build_dir: str | None
    program: str | None
    args: tuple[str, ...]
    files: tuple[str, ...]
    user: User
    workdir: str
    labels: tuple[tuple[str, str], ...]
    dlopen: tuple[str, ...]
    never_ship: tuple[str, ...]
    reuse_from_base: tuple[str, ...]
    strip: bool
    mounts: tuple[MountSpec, ...]
    pass_env: tuple[str, ...]
    secrets: tuple[SecretSpec, ...]
    gpus: str
    shm_size: str | None
    paths: tuple[tuple[str, str], ...]
    source: str
    fdl_version: str
    context: str = "."
    setup: tuple[str, ...] = ()
    follow_active: bool = False
    toolchain: str = "setup"

    @property
    def host_rust(self) -> bool:
        """Whether the build stage takes Rust and the crates from this machine."""
        return self.toolchain == "host"

    @property
    def program_name(self) -> str | None:
        """The program's file name (``build/train`` -> ``train``)."""
        return self.program.rstrip("/").rsplit("/", 1)[-1] if self.program else None

    def path(self, name: str) -> str:
        """A fixed path in the image (``libtorch``, ``app``)."""
        return dict(self.paths)[name]

    @property
    def needs_libtorch_image(self) -> bool:
        """Whether the build reads the variant (from the image fdl makes of it)."""
        return self.libtorch in ("baked", "closure")
