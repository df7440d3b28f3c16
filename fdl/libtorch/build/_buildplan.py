"""The build plan: every decision of ``fdl libtorch build``, as plain data.

``fdl libtorch build --dry-run --json`` prints :meth:`BuildPlan.to_json`; a real build runs
exactly these commands with exactly this environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._grammar import quoted
from fdl.compat.archs import ArchList
from fdl.compat.build import SwitchCost
from fdl.libtorch.build._cache import CachePlan, mask
from fdl.libtorch.build._checks import Problem
from fdl.libtorch.build._estimate import BuildEstimate

__all__ = ["BuildPlan", "Command", "DockerPart"]


@dataclass(frozen=True)
class Command:
    """One program the build runs.

    Attributes:
        what: ``clone``, ``venv``, ``deps``, ``build``, ``docker-build``, ``copy-out``.
        argv: The command line.
        cwd: Where it runs (None: anywhere).
        when: A condition (``source missing``), empty when it always runs.
    """

    what: str
    argv: tuple[str, ...]
    cwd: str | None = None
    when: str = ""

    def shell(self) -> str:
        text = " ".join(_word(w) for w in self.argv)
        return f"(cd {_word(self.cwd)} && {text})" if self.cwd else text

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "argv": list(self.argv), "cwd": self.cwd, "when": self.when}


@dataclass(frozen=True)
class DockerPart:
    """What the Docker backend needs beyond the common plan.

    Attributes:
        base_image: ``nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04`` or the one given.
        tag: The builder image's name.
        dockerfile: The rendered builder Dockerfile.
        cache_ids: BuildKit cache mount ids (source checkout, build tree, compiler cache).
        output: Where the finished libtorch is inside the image.
        network: ``host`` when the compiler cache lives on this machine's loopback.
    """

    base_image: str
    tag: str
    dockerfile: str
    cache_ids: Mapping[str, str]
    output: str
    network: str | None = None
    offline: bool = False


@dataclass(frozen=True)
class BuildPlan:
    """A complete, checked source build.

    Attributes:
        variant: ``builds/sm61-sm120``; output_dir: where it is installed.
        torch: The PyTorch release (``2.14.1``).
        cuda: The CUDA toolkit (``12.8``), None for a CPU build.
        archs: The targets (empty for CPU).
        backend: ``native`` or ``docker``.
        toolkit: Where the toolkit comes from (``local nvcc 13.0.88 at ...``, an image).
        jobs: ``MAX_JOBS``; jobs_reason says why that many.
        env: Every variable fdl sets for the build.
        env_removed: Build variables of the calling environment kept out of the build.
        commands: What runs, in order.
        source_dir, work_dir, log_file: Where the source, the build tree and the log are.
        venv: The Python environment holding the build dependencies, if any.
        deps: What is installed into it (``-r requirements.txt`` or package names).
        cache: The compiler cache.
        disk_gb, memory_gb: Estimates.
        problems: Warnings found by the checks (errors stop the planner).
        settings: Each requested value and where it came from.
        recipe: The recipe used, if any.
        activate: Make the result the active variant.
        fresh: Start from an empty build tree (no resume).
        flash_attention: Whether the flash-attention kernels are built.
        docker: The Docker part, for the docker backend.
        switch_costs: For each switch the build turns off: what it saves, what the GPUs
            lose, whether the project needs it.
        estimate: The build's estimated wall time and peak RAM on this machine.
        cache_root: The libtorch root's `.build-cache` (checkouts, venvs, build trees, logs).
    """

    variant: str
    output_dir: Path
    torch: str
    cuda: str | None
    archs: ArchList
    backend: str
    toolkit: str
    jobs: int
    jobs_reason: str
    env: Mapping[str, str]
    env_removed: tuple[str, ...]
    commands: tuple[Command, ...]
    source_dir: Path
    source_given: bool
    work_dir: Path
    log_file: Path
    venv: Path | None
    deps: tuple[str, ...]
    cache: CachePlan
    disk_gb: float
    memory_gb: float
    problems: tuple[Problem, ...] = ()
    settings: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    recipe: str | None = None
    activate: bool = True
    fresh: bool = False
    flash_attention: bool = True
    docker: DockerPart | None = None
    switch_costs: tuple[SwitchCost, ...] = ()
    estimate: BuildEstimate | None = None
    cache_root: Path | None = None

    @property
    def arch_list(self) -> str:
        """``TORCH_CUDA_ARCH_LIST`` (empty for CPU)."""
        return self.archs.torch_cuda_arch_list() if self.archs else ""

    def command(self, what: str) -> Command | None:
        return next((c for c in self.commands if c.what == what), None)

    def to_json(self) -> dict[str, Any]:
        """The whole plan, secrets masked (the ``--dry-run --json`` output)."""
        data: dict[str, Any] = {
            "variant": self.variant,
            "output": str(self.output_dir),
            "torch": self.torch,
            "cuda": self.cuda,
            "archs": {
                "requested": self.archs.codes(),
                "TORCH_CUDA_ARCH_LIST": self.arch_list,
                "gencode": self.archs.gencode_flags(),
            },
            "backend": self.backend,
            "toolkit": self.toolkit,
            "jobs": {"value": self.jobs, "reason": self.jobs_reason},
            "env": mask(dict(sorted(self.env.items()))),
            "env_removed": list(self.env_removed),
            "commands": [c.to_json() for c in self.commands],
            "paths": {
                "source": str(self.source_dir),
                "source_given": self.source_given,
                "work": str(self.work_dir),
                "log": str(self.log_file),
                "venv": str(self.venv) if self.venv else None,
            },
            "deps": list(self.deps),
            "cache": self.cache.to_json(),
            "estimates": {
                "disk_gb": self.disk_gb,
                "memory_gb": self.memory_gb,
                "build": self.estimate.to_json() if self.estimate is not None else None,
            },
            "flash_attention": self.flash_attention,
            "switches_off": [c.to_json() for c in self.switch_costs],
            "problems": [p.to_json() for p in self.problems],
            "settings": {k: dict(v) for k, v in sorted(self.settings.items())},
            "recipe": self.recipe,
            "activate": self.activate,
            "fresh": self.fresh,
        }
        if self.docker is not None:
            data["docker"] = {
                "base_image": self.docker.base_image,
                "tag": self.docker.tag,
                "cache_ids": dict(self.docker.cache_ids),
                "output": self.docker.output,
                "network": self.docker.network,
                "offline": self.docker.offline,
                "dockerfile": self.docker.dockerfile,
            }
        return data


def _word(word: str) -> str:
    return quoted("shell", word, what="a word", source="the build's step")
