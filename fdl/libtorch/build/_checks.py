"""Preconditions of a source build, each a pure function returning problems with their fix.

Every check runs before any work starts: a build that is doomed (a toolkit that cannot
target an arch, a compiler nvcc refuses, too little disk or RAM) must fail in a second,
not after two hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fdl.compat import (
    ArchList,
    compilable_toolkits,
    cudnn_limit,
    host_compilers,
    memory_per_job_gb,
    source_requirements,
    version_key,
)
from fdl.compat.cuda import Toolkit
from fdl.errors import Location
from fdl.libtorch.build._request import Setting

__all__ = [
    "Problem",
    "ToolkitNeed",
    "check_cmake",
    "check_cudnn",
    "check_disk",
    "check_docker",
    "check_host_compiler",
    "check_jobs",
    "check_native_tools",
    "check_python",
    "check_toolkit",
]


@dataclass(frozen=True)
class Problem:
    """Something that would make the build fail, or a warning worth reading first.

    Attributes:
        check: Which check found it (``host-compiler``, ``disk`` ...).
        message: What is wrong.
        hint: How to fix it.
        severity: ``error`` (the build does not start) or ``warning``.
        location: The manifest or recipe position of the value at fault, if any.
    """

    check: str
    message: str
    hint: str
    severity: str = "error"
    location: Location | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            "location": str(self.location) if self.location else None,
        }


def _at(setting: Setting[Any] | None) -> Location | None:
    return setting.location if setting is not None else None


def _or_join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


@dataclass(frozen=True)
class ToolkitNeed:
    """What a build asks of its CUDA toolkit: to compile ``archs`` (and build ``torch``,
    when given), locally (``native``) or in Docker, for a machine with ``driver``. What
    :func:`check_toolkit` holds a toolkit to, and what :meth:`fix` tells how to meet."""

    archs: ArchList
    native: bool
    torch: str | None = None
    driver: str | None = None

    def fix(self) -> str:
        """How to get a toolkit that compiles the archs (and builds the torch, when given):
        the Docker route with the toolkit every other answer names
        (:func:`fdl.compat.preferred_toolkit`), and the versions that would do locally."""
        from fdl.compat import buildable_toolkits, preferred_toolkit

        archs, torch = self.archs, self.torch
        kits = buildable_toolkits(torch, archs) if torch else compilable_toolkits(archs)
        able = [t.version for t in kits]
        if not able:
            return "build separate libtorch variants for these GPUs, or drop the oldest arch"
        listed = _or_join(sorted(able, key=version_key))
        if self.native:
            if torch:
                choice = preferred_toolkit(torch, archs, self.driver)
                docker = f"`--docker` (CUDA {choice.version}: {choice.why})"
            else:
                docker = "`--docker`"
            return f"build in Docker instead: {docker}, or install CUDA {listed} locally"
        return f"use --cuda {listed}"


def check_toolkit(
    kit: Toolkit | None, accepted: ArchList, need: ToolkitNeed, *, what: str
) -> list[Problem]:
    """Can this toolkit (``accepted`` = what its nvcc takes) emit every target ``need`` asks?

    Args:
        kit: fdl's facts of the toolkit; None for one its tables do not know (only what
            its nvcc accepts is told).
        what: Names the toolkit for the message (``the local nvcc 13.0``, ``--cuda 13.0``).
    """
    accepted_pairs = {(t.capability, t.suffix) for t in accepted}
    missing = [t for t in need.archs if (t.capability, t.suffix) not in accepted_pairs]
    if not missing:
        return []
    fix = need.fix()
    if kit is None:
        return [
            Problem("toolkit", f"{what} does not accept {' '.join(t.code for t in missing)}", fix)
        ]
    reasons = "; ".join(kit.problems(ArchList.of(missing))) or "; ".join(
        f"nvcc does not accept {t.code}" for t in missing
    )
    dropped = _dropped_generations(kit, missing)
    message = f"{what} cannot compile {' '.join(t.code for t in missing)}: {reasons}"
    if dropped:
        message += f" (CUDA {kit.major} dropped {dropped})"
    return [Problem("toolkit", message, fix)]


def _dropped_generations(kit: Toolkit, missing: list[Any]) -> str:
    """``Pascal`` when the toolkit is newer than the last one that compiled those archs."""
    names: list[str] = []
    for target in missing:
        generation = target.capability.generation
        if generation and generation not in names:
            probe = ArchList.of([target])
            older = [
                t
                for t in compilable_toolkits(probe)
                if version_key(t.version) < version_key(kit.version)
            ]
            if older:
                names.append(generation)
    return " and ".join(names)


def check_host_compiler(gcc_version: str | None, cuda: str, *, where: str) -> list[Problem]:
    """Is the host gcc one this CUDA accepts (nvcc refuses newer majors)?"""
    if gcc_version is None:
        return []
    limit = host_compilers(cuda).gcc
    major = int(gcc_version.split(".", 1)[0])
    if major <= limit:
        return []
    return [
        Problem(
            "host-compiler",
            f"{where} gcc {gcc_version} is newer than CUDA {cuda} accepts (gcc <= {limit}); "
            f"nvcc would stop with 'unsupported GNU version'",
            f"install gcc-{limit} and set CC=gcc-{limit} CXX=g++-{limit} (and CUDAHOSTCXX), "
            "or build with --docker",
        )
    ]


def _new_enough(
    check: str,
    found: str | None,
    need: str,
    torch: str,
    *,
    where: str,
    names: tuple[str, str, str],
    fix: str,
) -> list[Problem]:
    """Is ``found`` (a tool's version; None: no such tool on ``where``) at least ``need``?

    Args:
        names: How the tool is named: its command, its product, and how its version is
            told (``("cmake", "CMake", "cmake")``: no cmake, install CMake, cmake 3.25).
        fix: The hint for a version too old.
    """
    command, product, told = names
    if found is None:
        return [Problem(check, f"no {command} on {where}", f"install {product} >= {need}")]
    if version_key(found) >= version_key(need):
        return []
    message = f"{told} {found} on {where} is older than PyTorch {torch} needs (>= {need})"
    return [Problem(check, message, fix)]


def check_cmake(
    cmake_version: str | None, torch: str, *, where: str, need: str | None = None
) -> list[Problem]:
    """Is CMake new enough for this PyTorch release (or for what the checkout says it needs)?"""
    need = need or source_requirements(torch).cmake_min
    fix = (
        f"`pip install 'cmake>={need}'` (or your distribution's backports), or build with --docker"
    )
    return _new_enough(
        "cmake", cmake_version, need, torch, where=where, names=("cmake", "CMake", "cmake"), fix=fix
    )


def check_python(python_version: str | None, torch: str, *, where: str) -> list[Problem]:
    """Is Python new enough to run PyTorch's build scripts?"""
    need = source_requirements(torch).python_min
    fix = f"install Python >= {need} (e.g. with uv or pyenv), or build with --docker"
    return _new_enough(
        "python",
        python_version,
        need,
        torch,
        where=where,
        names=("python3", "Python", "Python"),
        fix=fix,
    )


def check_cudnn(cudnn: str | None, archs: ArchList, *, use_cudnn: bool) -> list[Problem]:
    """Does the cuDNN found still run on the oldest arch (9.11+ dropped Pascal)?"""
    limit = cudnn_limit(archs)
    if not use_cudnn or limit is None or cudnn is None:
        return []
    if version_key(cudnn)[:2] <= version_key(limit.max_cudnn)[:2]:
        return []
    oldest = min(archs.capabilities)
    return [
        Problem(
            "cudnn",
            f"cuDNN {cudnn} is too new for {oldest.label()}: {limit.reason}"
            + ("" if limit.verified else " (unverified)"),
            f"install cuDNN <= {limit.max_cudnn}, or build without it (switches: USE_CUDNN: 0)",
        )
    ]


def check_disk(
    free_gb: float, need_gb: float, *, where: str, given: str | None = None
) -> list[Problem]:
    """Is there room for the source, the build tree and the result? ``given``: where the
    need was set (``--disk-gb``, ``fdl.yml:12:5``), None for fdl's estimate."""
    if free_gb >= need_gb:
        return []
    need = f"{need_gb:.0f} GB ({given})" if given else f"about {need_gb:.0f} GB (fdl's estimate)"
    return [
        Problem(
            "disk",
            f"{free_gb:.1f} GB free on {where}, a build needs {need}",
            "free some space (`fdl libtorch remove` old variants, `docker builder prune`), "
            "or set FDL_HOME to a larger disk"
            + ("" if given else "; where you know the build needs less: --disk-gb N"),
        )
    ]


def check_jobs(
    jobs: Setting[int] | None, ram_gb: float, *, flash_attention: bool, cuda: bool
) -> list[Problem]:
    """Does the requested parallelism fit in RAM (about 5 GB per job with flash attention)?"""
    if jobs is None:
        return []
    per_job = memory_per_job_gb(flash_attention=flash_attention and cuda)
    allowed = max(1, int(ram_gb // per_job))
    if jobs.value <= allowed:
        return []
    why = "with the flash-attention kernels" if flash_attention and cuda else "per compile job"
    fix = f"use --jobs {allowed} or fewer"
    if flash_attention and cuda:
        fix += " (or --no-flash-attention: about 3 GB per job)"
    return [
        Problem(
            "jobs",
            f"{jobs.origin}: {jobs.value} jobs need about {jobs.value * per_job:.0f} GB of RAM "
            f"({per_job:g} GB each {why}), {ram_gb:.0f} GB available",
            fix,
            location=_at(jobs),
        )
    ]


def check_native_tools(
    tools: dict[str, str], *, clone: bool, cuda: bool, pip_cmake: bool = False
) -> list[Problem]:
    """Are the programs a native build runs on PATH? (``pip_cmake``: the build venv
    installs CMake, so the system's is not needed.)"""
    need = ([] if pip_cmake else ["cmake"]) + ["python3"] + (["git"] if clone else [])
    missing = [name for name in need if name not in tools]
    if "gcc" not in tools and "g++" not in tools:
        missing.append("gcc/g++")
    problems = []
    if missing:
        problems.append(
            Problem(
                "tools",
                f"native build needs {', '.join(missing)}, not found on PATH",
                "install them (apt install " + " ".join(_apt(missing)) + "), or use --docker",
            )
        )
    if "ninja" not in tools:
        problems.append(
            Problem(
                "tools",
                "ninja not found: the build falls back to make (slower, coarser progress)",
                "apt install ninja-build (or pip install ninja)",
                "warning",
            )
        )
    return problems


def _apt(names: list[str]) -> list[str]:
    packages = {"gcc/g++": "g++", "python3": "python3 python3-venv", "nvcc": "nvidia-cuda-toolkit"}
    return [packages.get(name, name) for name in names]


def check_docker(kind: str | None, reason: str | None) -> list[Problem]:
    """Is there a docker engine with BuildKit (cache mounts need it)?"""
    if kind == "buildkit":
        return []
    if kind is None:
        return [
            Problem(
                "docker",
                f"--docker: no docker engine ({reason or 'not found'})",
                "install and start docker (https://docs.docker.com/engine/install/), "
                "or build with --native",
            )
        ]
    return [
        Problem(
            "docker",
            "the docker client here has no BuildKit (the build needs RUN --mount cache mounts)",
            "install the buildx plugin, or set FDL_DOCKER to a docker client older than 23.0 "
            "(Debian's docker.io installs one as /usr/bin/docker)",
        )
    ]
