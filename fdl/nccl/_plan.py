"""``fdl nccl build``'s planner: request -> facts -> checks -> plan. Pure: no process runs,
nothing is written; ``--dry-run --json`` prints exactly the plan the executor runs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._grammar import quoted
from fdl.compat.archs import ArchList, Capability, parse_archs
from fdl.errors import EnvironmentProblem, UsageError

__all__ = [
    "DEFAULT_SOURCE",
    "NcclFacts",
    "NcclPlan",
    "NcclRequest",
    "gencode",
    "plan_nccl_build",
    "validate_tag",
]

# NVIDIA's NCCL repository (floDl clones it at the tag: assets/Dockerfile.nccl.source).
DEFAULT_SOURCE = "https://github.com/NVIDIA/nccl.git"
# NCCL's release tags: v2.27.5-1 (``v<X.Y.Z>-<revision>``); a branch such as ``master`` too.
_TAG = re.compile(r"v?\d{1,3}\.\d{1,3}\.\d{1,4}-\d{1,3}|[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_VERSION_TAG = re.compile(r"v?(\d{1,3}\.\d{1,3}\.\d{1,4})-\d{1,3}")
_URL = re.compile(
    r"(?:https|http|git|ssh)://[A-Za-z0-9._~:/@%+-]{1,400}|file:///[A-Za-z0-9._~/%+-]{1,400}"
)
_IMAGE = re.compile(
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?"
)
# Paths inside the builder image.
CONTAINER = {
    "cache": "/opt/nccl-cache",
    "context": "/opt/context-src",
    "work": "/opt/nccl-src",
    "output": "/opt/nccl",
}
TEMPLATE = "nccl-builder.Dockerfile"
IMAGE_PREFIX = "fdl-nccl-build"


@dataclass(frozen=True)
class NcclRequest:
    """What the user asked for (``None``: work it out)."""

    tag: str | None = None
    archs: str | None = None
    jobs: int | None = None
    source: str | None = None
    base_image: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class NcclFacts:
    """What the machine said (gathered by :func:`fdl.nccl.gather_facts`, once).

    Attributes:
        libtorch_dir: ``<root>/libtorch``.
        variant: The active variant's name (``precompiled/cu128``), or None.
        cuda: Its CUDA toolkit (``12.8``), or None (a CPU build, or unknown).
        torch: Its torch release, when known.
        banner_version: The NCCL version read from its ``lib/libtorch_cuda.so``.
        banner_file: That file (for the message when nothing was read).
        gpus: The NVIDIA GPUs here, as ``sm_61`` names.
        cpus: CPU cores here (the default ``--jobs``).
        vendor: The active variant's GPU vendor (``nvidia``, ``amd``), when known.
        source_is_dir: ``request.source`` names a directory here.
        source_has_makefile: ... and that directory has a ``Makefile``.
    """

    libtorch_dir: Path
    variant: str | None = None
    cuda: str | None = None
    torch: str | None = None
    banner_version: str | None = None
    banner_file: Path | None = None
    gpus: tuple[str, ...] = ()
    cpus: int = 4
    vendor: str | None = None
    source_is_dir: bool = False
    source_has_makefile: bool = False


@dataclass(frozen=True)
class NcclPlan:
    """A planned NCCL build. ``output`` lies under ``libtorch/nccl/builds/``."""

    tag: str
    version: str
    tag_from: str
    archs: tuple[str, ...]
    archs_from: str
    gencode: str
    cuda: str
    base_image: str
    variant: str | None
    source: str
    source_kind: str  # "dir" or "git"
    jobs: int
    output: Path
    image: str
    dockerfile: str
    notes: tuple[str, ...] = field(default=())

    @property
    def library(self) -> Path:
        return self.output / "lib" / "libnccl.so.2"

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "version": self.version,
            "tag_from": self.tag_from,
            "archs": list(self.archs),
            "archs_from": self.archs_from,
            "nvcc_gencode": self.gencode,
            "cuda": self.cuda,
            "base_image": self.base_image,
            "variant": self.variant,
            "source": {"kind": self.source_kind, "location": self.source},
            "jobs": self.jobs,
            "output": str(self.output),
            "library": str(self.library),
            "image": self.image,
            "ld_preload": str(self.library),
            "dockerfile": self.dockerfile,
            "notes": list(self.notes),
        }


def validate_tag(tag: str) -> str:
    """``tag`` when it is an NCCL git tag (``v2.27.5-1``) or a plain ref name.

    Raises:
        UsageError: shell characters, spaces, an empty value (it goes into a Dockerfile).
    """
    text = tag.strip()
    if not _TAG.fullmatch(text):
        raise UsageError(
            f"--tag {tag!r} is not an NCCL git tag: only letters, digits, '.', '_' and '-' "
            "(64 at most) are accepted",
            hint="write it as NVIDIA tags NCCL releases, e.g. --tag v2.27.5-1; or leave --tag "
            "out to match the active libtorch",
        )
    return text


def gencode(archs: ArchList) -> str:
    """NCCL's ``NVCC_GENCODE``: ``-gencode=arch=compute_61,code=sm_61 ...`` (cubins, then PTX)."""
    return " ".join(f"-gencode=arch={t.arch},code={t.code}" for t in (*archs.cubins, *archs.ptx))


def plan_nccl_build(request: NcclRequest, facts: NcclFacts) -> NcclPlan:
    """The NCCL build for ``request`` on the machine ``facts`` describe.

    Raises:
        UsageError: a bad ``--tag``, ``--archs``, ``--jobs``, ``--source`` or ``--base-image``.
        EnvironmentProblem: nothing to take the version, the archs or the toolkit from.
    """
    if facts.vendor == "amd":
        raise EnvironmentProblem(
            f"the active libtorch ({facts.variant}) is a ROCm build: it carries RCCL, AMD's "
            "NCCL, and NVIDIA's NCCL has no code for AMD GPUs",
            hint="activate a CUDA variant first (fdl libtorch list; fdl libtorch activate NAME)",
        )
    tag, version, tag_from = _tag(request, facts)
    archs, archs_from = _archs(request, facts)
    cuda = _cuda(facts)
    base = _base_image(request, cuda)
    notes = _toolkit_check(request, cuda, archs)
    source, kind = _source(request, facts)
    jobs = _jobs(request, facts)
    output = facts.libtorch_dir / "nccl" / "builds" / f"v{version}-{archs.dir_name()}"
    flags = gencode(archs)
    image = f"{IMAGE_PREFIX}:v{version}-{archs.dir_name()}"
    dockerfile = render_dockerfile(
        base_image=base,
        tag=tag,
        version=version,
        gencode=flags,
        jobs=jobs,
        clone=source if kind == "git" else None,
        arch_text=archs.torch_cuda_arch_list(),
    )
    if facts.cuda is None:
        which = (
            f"the active libtorch ({facts.variant}) names no"
            if facts.variant
            else "no active libtorch, so no"
        )
        notes.append(f"{which} CUDA version: CUDA {cuda} is assumed")
    return NcclPlan(
        tag=tag,
        version=version,
        tag_from=tag_from,
        archs=tuple(archs.codes()),
        archs_from=archs_from,
        gencode=flags,
        cuda=cuda,
        base_image=base,
        variant=facts.variant,
        source=source,
        source_kind=kind,
        jobs=jobs,
        output=output,
        image=image,
        dockerfile=dockerfile,
        notes=tuple(notes),
    )


def _tag(request: NcclRequest, facts: NcclFacts) -> tuple[str, str, str]:
    if request.tag is not None:
        tag = validate_tag(request.tag)
        match = _VERSION_TAG.fullmatch(tag)
        if match is None:
            raise UsageError(
                f"--tag {tag!r} names no NCCL release (v<X.Y.Z>-<N>): fdl cannot name the build",
                hint="pass a release tag, e.g. --tag v2.27.5-1",
            )
        return tag if tag.startswith("v") else f"v{tag}", match.group(1), "--tag"
    if facts.banner_version is not None:
        return f"v{facts.banner_version}-1", facts.banner_version, str(facts.banner_file)
    from fdl.compat.nccl import torch_nccl

    wheel = torch_nccl(facts.torch)
    if wheel is not None:
        version = ".".join(wheel.version.split(".")[:3])
        return f"v{version}-1", version, f"torch {facts.torch} pins {wheel.requirement}"
    if facts.variant is None:
        raise EnvironmentProblem(
            "no active libtorch to match the NCCL version to",
            hint="activate one (fdl libtorch activate NAME), or pass --tag, e.g. --tag v2.27.5-1",
        )
    where = facts.banner_file or facts.libtorch_dir / facts.variant / "lib" / "libtorch_cuda.so"
    raise EnvironmentProblem(
        f"{where}: no NCCL version banner ('NCCL version X.Y.Z+cuda') read, and fdl's tables "
        f"know no NCCL pin for torch {facts.torch or '(unknown)'}",
        hint="pass the NCCL release to build, e.g. fdl nccl build --tag v2.27.5-1",
    )


def _archs(request: NcclRequest, facts: NcclFacts) -> tuple[ArchList, str]:
    if request.archs is not None:
        archs = parse_archs(request.archs)
        return archs, "--archs"
    from fdl.nccl._facts import gpu_capabilities

    caps: Sequence[Capability] = gpu_capabilities(facts.gpus)
    if not caps:
        raise EnvironmentProblem(
            "no NVIDIA GPU found here to build NCCL's device code for",
            hint='name the GPUs of the rig, e.g. fdl nccl build --archs "6.1;12.0"',
        )
    return parse_archs([str(c) for c in caps]), "the GPUs here"


def _cuda(facts: NcclFacts) -> str:
    from fdl.compat import load_table

    if facts.cuda is not None:
        return facts.cuda
    return str(load_table("nccl")["build"]["default_cuda"])


def _toolkit_check(request: NcclRequest, cuda: str, archs: ArchList) -> list[str]:
    """The default builder's nvcc must emit every arch (CUDA 13 has no sm_61); a given
    ``--base-image`` has a toolkit fdl does not know: said, not checked."""
    if request.base_image is not None:
        return [f"the toolkit inside {request.base_image} is not checked against the archs"]
    from fdl.compat.cuda import toolkit

    problems = toolkit(cuda).problems(archs)
    if problems:
        older = _toolkits_for(archs)
        fix = (
            f"build with a toolkit that has them: --base-image {older[-1]} (the library links "
            "the CUDA runtime statically; the driver must serve both)"
            if older
            else "leave those archs out (--archs)"
        )
        raise EnvironmentProblem(
            f"the variant's CUDA {cuda} cannot build NCCL for every arch: " + "; ".join(problems),
            hint=fix,
        )
    return []


def _toolkits_for(archs: ArchList) -> list[str]:
    """The devel images of the toolkits that can emit every one of ``archs``, oldest first."""
    from fdl.compat.cuda import image_tag, toolkits

    return [image_tag(t.version, "devel") for t in toolkits() if not t.problems(archs)]


def _base_image(request: NcclRequest, cuda: str) -> str:
    if request.base_image is not None:
        if not _IMAGE.fullmatch(request.base_image):
            raise UsageError(
                f"--base-image {request.base_image!r} is not an image reference",
                hint="write it as NAME[:TAG], e.g. nvidia/cuda:12.8.1-devel-ubuntu24.04",
            )
        return request.base_image
    from fdl.compat.cuda import image_tag

    return image_tag(cuda, "devel")


def _source(request: NcclRequest, facts: NcclFacts) -> tuple[str, str]:
    source = request.source
    if source is None:
        return DEFAULT_SOURCE, "git"
    if facts.source_is_dir:
        if not facts.source_has_makefile:
            raise UsageError(
                f"--source {source}: no Makefile there, so it is not an NCCL source tree",
                hint="point --source at a checkout of https://github.com/NVIDIA/nccl (git clone "
                "--branch v2.27.5-1 https://github.com/NVIDIA/nccl.git), or leave it out",
            )
        return source, "dir"
    if _URL.fullmatch(source):
        return source, "git"
    raise UsageError(
        f"--source {source!r} is neither a directory here nor a git URL fdl accepts",
        hint=f"give a checkout of NVIDIA's NCCL (a directory) or a URL such as {DEFAULT_SOURCE}",
    )


def _jobs(request: NcclRequest, facts: NcclFacts) -> int:
    if request.jobs is None:
        return max(1, facts.cpus)
    if not 1 <= request.jobs <= 1024:
        raise UsageError(f"--jobs {request.jobs} is out of range", hint="use 1 to 1024")
    return request.jobs


def _short_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


def render_dockerfile(
    *,
    base_image: str,
    tag: str,
    version: str,
    gencode: str,
    jobs: int,
    clone: str | None,
    arch_text: str,
) -> str:
    """The builder Dockerfile (deterministic; every value was validated above, and the one
    with spaces, NVCC_GENCODE, is a quoted shell word)."""

    from fdl._assets import asset_dir, template_environment
    from fdl.compat import load_table

    table = load_table("nccl")["build"]
    tools = {**table["image_tools"], **(table["clone_tools"] if clone else {})}
    environment = template_environment(asset_dir("dockerfiles"))
    return environment.get_template(TEMPLATE).render(
        base_image=base_image,
        tag=tag,
        version=version,
        arch_text=arch_text,
        gencode=_word(gencode),
        jobs=jobs,
        clone=_word(clone) if clone else None,
        tools=[f"{tool}={pkg}" for tool, pkg in sorted(tools.items())],
        # one checkout per tag and repository: a fork's v2.27.5-1 is not NVIDIA's
        cache_id=f"fdl-nccl-src-{tag}-{_short_hash(clone or '')}",
        paths=CONTAINER,
    )


def _word(word: str) -> str:
    return quoted("run", word, what="a word", source="the NCCL build's Dockerfile")
