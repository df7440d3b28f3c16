"""Stage 2 of planning a source build, first half: the backend (native or docker) and the
CUDA toolkit it builds with, with the problems of each (tools, CMake, compilers, the
driver); ``backend: auto`` takes docker where native is not possible (pure)."""

from __future__ import annotations

from dataclasses import replace

from fdl.compat import (
    ArchList,
    Match,
    build_constraints,
    check_driver,
    covers,
    preferred_toolkit,
    toolkit,
)
from fdl.errors import UsageError
from fdl.libtorch.build import _checks as checks
from fdl.libtorch.build._checks import Problem
from fdl.libtorch.build._facts import MachineFacts
from fdl.libtorch.build._ingredients import (
    Toolchoice,
)
from fdl.libtorch.build._request import BuildRequest, located_error

__all__ = ["choose_backend"]


def choose_backend(
    request: BuildRequest, facts: MachineFacts, archs: ArchList, torch: str
) -> tuple[Toolchoice, list[Problem]]:
    backend = str(request.value("backend", "auto"))
    if backend == "native":
        return _native(request, facts, archs, torch)
    if backend == "docker":
        return _docker(request, facts, archs, torch)
    native, native_problems = _native(request, facts, archs, torch)
    if not [p for p in native_problems if p.severity == "error"]:
        return native, native_problems
    if facts.docker == "buildkit":
        docker, docker_problems = _docker(request, facts, archs, torch)
        note = native_problems[0]
        reason = f"docker (native is not possible: {note.message})"
        return Toolchoice("docker", docker.kit, f"{reason}; {docker.description}"), docker_problems
    return native, native_problems + checks.check_docker(facts.docker, facts.docker_reason)


def _native(
    request: BuildRequest, facts: MachineFacts, archs: ArchList, torch: str
) -> tuple[Toolchoice, list[Problem]]:
    clone = request.source is None
    # The build runs the CMake of its venv when its requirements install one (the table's
    # packages for a clone; the tree's requirements file for --source): check that, not
    # the system's.
    pip_cmake = clone or (facts.source is not None and facts.source.requirements_cmake)
    problems = checks.check_native_tools(
        dict(facts.tools), clone=clone, cuda=bool(archs), pip_cmake=pip_cmake
    )
    if not pip_cmake:
        problems += checks.check_cmake(
            facts.tools.get("cmake"),
            torch,
            where="this machine",
            need=facts.source.cmake_minimum if facts.source is not None else None,
        )
    problems += checks.check_python(facts.tools.get("python3"), torch, where="this machine")
    if not archs:
        return Toolchoice("native", None, "host compilers (CPU build)"), problems
    need = checks.ToolkitNeed(archs, native=True, torch=torch, driver=facts.driver)
    nvcc = facts.nvcc
    if nvcc is None:
        why = facts.nvcc_reason or "nvcc not found"
        return Toolchoice("native", None, "no local CUDA"), [
            *problems,
            Problem("toolkit", f"a native CUDA build needs nvcc: {why}", need.fix()),
        ]
    try:
        kit = toolkit(nvcc.version)
    except UsageError:
        kit = None
    what = f"the local nvcc {nvcc.version} ({nvcc.path})"
    wanted = request.cuda
    if wanted is not None and (kit is None or toolkit(str(wanted.value)).version != kit.version):
        problems.append(
            Problem(
                "toolkit",
                f"{wanted.origin}: CUDA {wanted.value} was asked for, but a native build uses "
                f"{what}",
                f"build with --docker --cuda {wanted.value}, or install CUDA {wanted.value} "
                "and put its nvcc first on PATH",
                location=wanted.location,
            )
        )
    problems += _release_cuda(None, nvcc.version, torch, archs, native=True)
    problems += _driver_problems(facts, nvcc.version, archs)
    if not nvcc.cuda_home:
        problems.append(
            Problem(
                "toolkit",
                f"the CUDA toolkit of {nvcc.path} was not found: "
                f"{nvcc.home_reason or 'no toolkit root'}",
                "set CUDA_HOME to the toolkit's root (the directory holding "
                "include/cuda_runtime.h and lib64/libcudart.so), or build with --docker",
            )
        )
    problems += checks.check_toolkit(kit, nvcc.targets, need, what=what)
    if kit is not None:
        gcc = facts.tools.get("gcc") or facts.tools.get("g++")
        problems += checks.check_host_compiler(gcc, kit.version, where="the host")
    description = f"local nvcc {nvcc.full_version} at {nvcc.path}"
    return Toolchoice("native", kit, description), problems


def _docker(
    request: BuildRequest, facts: MachineFacts, archs: ArchList, torch: str
) -> tuple[Toolchoice, list[Problem]]:
    problems = checks.check_docker(facts.docker, facts.docker_reason)
    if not archs:
        return Toolchoice("docker", None, "the base image's compilers (CPU build)"), problems
    wanted = request.cuda
    if wanted is not None:
        try:
            kit = toolkit(str(wanted.value))
        except UsageError as exc:
            raise located_error(wanted, exc.message, exc.hint) from None
        problems += [
            _locate(p, wanted)
            for p in checks.check_toolkit(
                kit,
                kit.targets,
                checks.ToolkitNeed(archs, native=False, torch=torch),
                what=f"CUDA {kit.version}",
            )
        ]
        problems += _release_cuda(wanted, kit.version, torch, archs, native=False)
        problems += _driver_problems(facts, kit.version, archs)
        return Toolchoice("docker", kit, f"CUDA {kit.version} ({wanted.origin})"), problems
    choice = preferred_toolkit(torch, archs, facts.driver)  # _check_release made sure of one
    if choice.note is not None:
        problems.append(Problem("toolkit", choice.note, "pin another --torch or --cuda", "warning"))
    problems += _driver_problems(facts, choice.version, archs)
    return Toolchoice("docker", choice.kit, f"CUDA {choice.version}: {choice.why}"), problems


def _driver_problems(facts: MachineFacts, cuda: str, archs: ArchList) -> list[Problem]:
    """A build whose CUDA this machine's driver cannot run on its GPUs (it may be meant for
    another machine, so a warning), with the driver it needs: the toolkit's floor, the
    GPUs' own (no driver before R570 knows Blackwell), and the toolkit's own driver where a
    GPU would run the build's PTX."""
    if not facts.driver:
        return []
    gpus = facts.capabilities
    ptx = any(v.match is Match.PTX for v in covers(archs, gpus)) if archs else False
    check = check_driver(facts.driver, cuda, gpus=gpus, ptx=ptx)
    if check.ok:
        return []
    # A GPU's own floor: no --cuda, older or newer, helps; only the driver does.
    fix = (
        f"{check.fix}; the build itself may go on (fine when it is for another machine)"
        if check.gpu_floor
        else f"{check.fix}, or build with an older --cuda (fine when the build is for "
        "another machine)"
    )
    return [
        Problem(
            "driver",
            f"{check.reason}: the result would not run on this machine's GPUs",
            fix,
            "warning",
        )
    ]


def _release_cuda(
    wanted: object, cuda: str, torch: str, archs: ArchList, *, native: bool
) -> list[Problem]:
    """The toolkit ``cuda`` against the CUDA range of the release being built."""
    why = build_constraints(torch).cuda_problem(cuda)
    if why is None:
        return []
    origin = getattr(wanted, "origin", None)
    message = f"{origin}: {why}" if origin else why
    fix = checks.ToolkitNeed(archs, native=native, torch=torch).fix()
    problem = Problem("toolkit", message, fix)
    return [_locate(problem, wanted)]


def _locate(problem: Problem, setting: object) -> Problem:

    location = getattr(setting, "location", None)
    return replace(problem, location=location) if location is not None else problem
