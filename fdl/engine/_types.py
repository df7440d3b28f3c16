"""What the engine is asked to do and what it answers: plain, typed values."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = [
    "BuildResult",
    "BuildSpec",
    "BuildStep",
    "Builder",
    "ClientSelection",
    "ComposeCommand",
    "DiskUsage",
    "DockerClient",
    "Engine",
    "ImageInfo",
    "Layer",
    "LineCallback",
    "Mount",
    "RunResult",
    "RunSpec",
    "Secret",
]

LineCallback = Callable[[str], None]


class Builder(enum.Enum):
    """How a docker client builds images, best first."""

    BUILDX = "buildx"  # `docker buildx build --load`
    BUILDKIT = "buildkit"  # `DOCKER_BUILDKIT=1 docker build` (BuildKit inside the client, < 23)
    CLASSIC = "classic"  # the legacy builder: no RUN --mount, no secrets

    @property
    def has_buildkit(self) -> bool:
        return self is not Builder.CLASSIC

    @property
    def rank(self) -> int:
        return list(Builder).index(self)


@dataclass(frozen=True)
class Secret:
    """Where a build secret comes from: a file or an environment variable (exactly one)."""

    file: Path | None = None
    env: str | None = None

    def __post_init__(self) -> None:
        if (self.file is None) == (self.env is None):
            raise ValueError("a Secret takes exactly one of file= or env=")


@dataclass(frozen=True)
class BuildSpec:
    """One image build.

    Attributes:
        context: The build context directory.
        dockerfile: A Dockerfile path (default: ``<context>/Dockerfile``).
        dockerfile_text: The Dockerfile itself, instead of a path (written to a
            temporary file outside the context).
        tags: Names to give the image.
        build_args, labels: ``--build-arg`` and ``--label`` values.
        target: The stage to build (``--target``).
        secrets: Build secrets by id (``RUN --mount=type=secret,id=<id>``).
        cache_from, cache_to: Cache sources/exports (``type=inline`` works with
            every BuildKit client; other exports need buildx).
        no_cache: Build every step again.
        pull: Look for newer base images in their registry (off: local images are used).
        platform: ``linux/amd64`` and the like.
        network: The network of RUN steps (``host``, ``none``, ``default``).
    """

    context: Path
    dockerfile: Path | None = None
    dockerfile_text: str | None = None
    tags: tuple[str, ...] = ()
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None
    secrets: Mapping[str, Secret] = field(default_factory=dict)
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()
    no_cache: bool = False
    pull: bool = False
    platform: str | None = None
    network: str | None = None

    def __post_init__(self) -> None:
        if self.dockerfile is not None and self.dockerfile_text is not None:
            raise ValueError("give dockerfile= or dockerfile_text=, not both")


@dataclass(frozen=True)
class BuildStep:
    """A step of a build as its progress output showed it.

    Attributes:
        name: The instruction (``RUN make -j2``).
        cached: Whether the step came from the build cache.
        stage: BuildKit's label of the step (``builder 3/5``); empty for the classic builder.
    """

    name: str
    cached: bool
    stage: str = ""


@dataclass(frozen=True)
class BuildResult:
    """What a build made."""

    image_id: str
    tags: tuple[str, ...]
    builder: Builder
    steps: tuple[BuildStep, ...] = ()

    @property
    def cached_steps(self) -> list[str]:
        return [step.name for step in self.steps if step.cached]

    @property
    def built_steps(self) -> list[str]:
        return [step.name for step in self.steps if not step.cached]


@dataclass(frozen=True)
class Layer:
    """One entry of an image's history (``docker history``), oldest first."""

    created_by: str
    size: int
    created: str = ""
    comment: str = ""


@dataclass(frozen=True)
class ImageInfo:
    """What ``docker image inspect`` and ``docker history`` tell about an image."""

    id: str
    tags: tuple[str, ...]
    size: int
    labels: Mapping[str, str]
    user: str
    env: Mapping[str, str]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    workdir: str
    architecture: str
    os: str
    created: str
    layers: tuple[Layer, ...] = ()
    repo_digests: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiskUsage:
    """How much disk an image takes, and how much of it only this image uses."""

    image_id: str
    size: int
    shared_size: int
    unique_size: int
    layers: tuple[Layer, ...] = ()


@dataclass(frozen=True)
class Mount:
    """A mount into a container (``--mount``); a bind source must exist."""

    source: str
    target: str
    type: str = "bind"
    read_only: bool = False


@dataclass(frozen=True)
class RunSpec:
    """One container run.

    Attributes:
        env: Variables for the container; a value of None passes the variable
            through from fdl's own environment (its value stays off the command line).
        gpus: ``all``, a count, or ``device=0,1``; None runs without GPUs.
        remove: Remove the container when it exits (``--rm``).
        interactive, tty: Attach the terminal (``-i``/``-t``); the output is then
            not captured.
        shm_size: ``/dev/shm`` size (PyTorch data loaders need more than 64 MB).
        pull: ``missing`` (docker's default), ``always`` or ``never``.
        extra_args: Further ``docker run`` options, verbatim, before the image.
    """

    image: str
    argv: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str | None] = field(default_factory=dict)
    user: str | None = None
    workdir: str | None = None
    gpus: str | None = None
    remove: bool = True
    interactive: bool = False
    tty: bool = False
    network: str | None = None
    name: str | None = None
    entrypoint: str | None = None
    shm_size: str | None = None
    pull: str | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """How a container run ended. With a line callback stdout holds both streams."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class DockerClient:
    """One docker CLI executable and what it can do.

    Attributes:
        path: The executable.
        version: The client version (``28.2.2``), empty when it did not say.
        builder: The best way it can build.
        buildx: ``docker buildx version`` output, None without the plugin.
        server_version: The daemon's version, None when no daemon answered.
        problem: Why no daemon answered (the client's own words), if it did not.
    """

    path: str
    version: str
    builder: Builder
    buildx: str | None = None
    server_version: str | None = None
    problem: str | None = None

    @property
    def usable(self) -> bool:
        return self.server_version is not None

    def describe(self) -> str:
        """One line for diagnose output."""
        how = {
            Builder.BUILDX: f"buildx plugin ({self.buildx})",
            Builder.BUILDKIT: "BuildKit built into the client (DOCKER_BUILDKIT=1 docker build)",
            Builder.CLASSIC: "classic builder only (no buildx plugin, no built-in BuildKit)",
        }[self.builder]
        daemon = f"daemon {self.server_version}" if self.usable else f"no daemon: {self.problem}"
        return f"{self.path} (client {self.version or '?'}): {how}; {daemon}"


@dataclass(frozen=True)
class ComposeCommand:
    """How to run docker compose here.

    Attributes:
        argv: The prefix to put before compose arguments
            (``[docker, "compose"]`` or ``["/usr/bin/docker-compose"]``).
        version: Its version.
        flavour: ``plugin`` (compose v2 inside the docker CLI) or ``standalone``.
        env: Variables to add to the environment of every compose invocation
            (see :func:`fdl.engine.find_compose`).
        notes: Why this one was chosen and what was tried.
    """

    argv: tuple[str, ...]
    version: str
    flavour: str
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClientSelection:
    """The chosen client, every client that was asked, and why.

    Attributes:
        client: The one fdl drives.
        tried: All candidates in the order they were asked.
        source: ``FDL_DOCKER`` or ``PATH``.
    """

    client: DockerClient
    tried: tuple[DockerClient, ...]
    source: str

    @property
    def reason(self) -> str:
        """Why this client, in one sentence."""
        chosen = self.client
        others = [c for c in self.tried if c.path != chosen.path]
        text = f"{chosen.path} (client {chosen.version or '?'}) builds with {chosen.builder.value}"
        if self.source == "FDL_DOCKER":
            return text + " (set by FDL_DOCKER)"
        better = [c for c in others if c.builder.rank < chosen.builder.rank]
        if better:
            return (
                text
                + "; clients that build better have no daemon: "
                + ", ".join(c.path for c in better)
            )
        worse = [c for c in others if c.builder.rank > chosen.builder.rank]
        if worse:
            return (
                text
                + "; preferred over "
                + ", ".join(f"{c.path} ({c.builder.value})" for c in worse)
            )
        return text + " (first on PATH)"

    def explain(self) -> list[str]:
        """Lines for diagnose output: the choice, then every candidate."""
        return [f"docker client: {self.reason}"] + [f"  {c.describe()}" for c in self.tried]


class Engine(Protocol):
    """The container engine as the rest of fdl sees it."""

    def describe(self) -> ClientSelection:
        """Which client it drives and why (for diagnose output)."""
        ...

    def build(
        self, spec: BuildSpec, *, on_line: LineCallback | None = None, log_file: Path | None = None
    ) -> BuildResult:
        """Build an image; raise EnvironmentProblem when it needs what the engine lacks."""
        ...

    def image_exists(self, ref: str) -> bool:
        """Whether the image is in the local store."""
        ...

    def inspect_image(self, ref: str) -> ImageInfo:
        """Its configuration and layers."""
        ...

    def list_images(self, reference: str) -> list[str]:
        """Names (``repo:tag``) of the local images matching ``reference`` (a glob such as
        ``fdl-libtorch*``)."""
        ...

    def remove_image(self, ref: str, *, force: bool = False) -> bool:
        """Remove it; False when it was not there."""
        ...

    def tag(self, source: str, target: str) -> None:
        """Give an image another name."""
        ...

    def push(self, ref: str, *, on_line: LineCallback | None = None) -> None:
        """Push to its registry."""
        ...

    def save(self, ref: str, dest: Path) -> Path:
        """Write the image as a ``docker save`` archive (config, uncompressed layer tars,
        ``manifest.json``) to ``dest``."""
        ...

    def registry_credentials(self, host: str) -> tuple[str, str] | None:
        """(user, secret) the engine's config holds for the registry ``host``, if any."""
        ...

    def run(self, spec: RunSpec, *, on_line: LineCallback | None = None) -> RunResult:
        """Run a container and return how it ended (a non-zero exit is not an error)."""
        ...

    def copy_out(self, image: str, path_in_image: str, host_dir: Path) -> Path:
        """Copy a directory's contents (or a file) out of an image into ``host_dir``."""
        ...

    def disk_usage(self, image: str) -> DiskUsage:
        """The image's size, the part shared with other images, and its layers."""
        ...

    def compose(self) -> ComposeCommand:
        """How to run docker compose with this engine."""
        ...
