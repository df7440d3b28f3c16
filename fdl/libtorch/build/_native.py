"""The native backend: clone (or take ``--source``), build dependencies in a venv, build.

Everything runs through the Runner with the plan's environment; the full output goes to the
plan's log file and each line to a callback (the CLI turns it into a status line). A re-run
resumes: the checkout, the venv and the CMake build tree are kept.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.libtorch.build._buildplan import BuildPlan
from fdl.libtorch.build._cache import CacheStats, cache_stats, start_cache, stop_cache
from fdl.libtorch.build._dist import read_token
from fdl.runner import Runner

__all__ = ["NativeResult", "build_environment", "build_natively", "collect_installed"]

Note = Callable[[str], None]
DEPS_STAMP = ".fdl-deps"


@dataclass(frozen=True)
class NativeResult:
    """What a native build reports besides its files."""

    stats: CacheStats
    cache_warning: str | None
    facts: dict[str, str]


def build_environment(
    plan: BuildPlan, environ: Mapping[str, str], cache_env: Mapping[str, str]
) -> dict[str, str]:
    """The build's environment: the caller's, minus leaking build variables, plus the plan's."""
    env = {k: v for k, v in environ.items() if k not in plan.env_removed}
    env.update(plan.env)
    for key in (
        "CMAKE_C_COMPILER_LAUNCHER",
        "CMAKE_CXX_COMPILER_LAUNCHER",
        "CMAKE_CUDA_COMPILER_LAUNCHER",
    ):
        env.pop(key, None)
    env.update(cache_env)
    if plan.venv is not None:
        env["PATH"] = f"{plan.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(plan.venv)
    return env


def _clone(plan: BuildPlan, runner: Runner, env: Mapping[str, str], on_line: Note) -> None:
    command = plan.command("clone")
    if command is None or (plan.source_dir / ".git").exists():
        return
    partial = plan.source_dir.with_name(plan.source_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    argv = [str(partial) if a == str(plan.source_dir) else a for a in command.argv]
    try:
        runner.stream(argv, env=env, log_file=plan.log_file, on_line=on_line)
    except CommandFailed as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise _with_hint(
            exc,
            plan,
            "check the network (GitHub must be reachable), or clone it elsewhere and "
            "pass --source DIR",
        ) from None
    partial.rename(plan.source_dir)


def _with_hint(exc: CommandFailed, plan: BuildPlan, hint: str) -> CommandFailed:
    """``exc`` again, naming the plan's log file and with ``hint`` as its fix."""
    return CommandFailed(
        exc.argv, exc.returncode, output_tail=exc.details or "", log_file=plan.log_file, hint=hint
    )


def _fetch_optional(plan: BuildPlan, runner: Runner, env: Mapping[str, str], on_line: Note) -> None:
    """Clone what the build would clone while compiling (tools/optional_submodules.py:
    NCCL, Eigen), so a network problem shows now, not an hour into the compile."""
    command = plan.command("fetch")
    if command is None or not Path(command.argv[-1]).is_file():
        return
    try:
        runner.stream(
            list(command.argv),
            env=env,
            cwd=plan.source_dir,
            log_file=plan.log_file,
            on_line=on_line,
        )
    except CommandFailed as exc:
        raise _with_hint(
            exc,
            plan,
            "check the network (GitHub and gitlab.com must be reachable), or clone the "
            "optional dependencies into the tree's third_party/ yourself",
        ) from None


def _dependencies(plan: BuildPlan, runner: Runner, env: Mapping[str, str], on_line: Note) -> None:
    if plan.venv is None:
        return
    create, install = plan.command("venv"), plan.command("deps")
    if create is not None and not (plan.venv / "bin" / "python").exists():
        try:
            runner.stream(list(create.argv), env=env, log_file=plan.log_file, on_line=on_line)
        except CommandFailed as exc:
            raise EnvironmentProblem(
                f"cannot create the build environment {plan.venv}",
                hint="install the venv module (apt install python3-venv)",
                details=exc.details,
            ) from None
    stamp = plan.venv / DEPS_STAMP
    wanted = " ".join(install.argv[4:]) if install else ""
    if install is None or (stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted):
        return
    runner.stream(list(install.argv), env=env, log_file=plan.log_file, on_line=on_line)
    stamp.write_text(wanted, encoding="utf-8")


def fetch_natively(
    plan: BuildPlan, runner: Runner, environ: Mapping[str, str], *, on_line: Note
) -> None:
    """The fetch phase alone: the clone, the optional dependencies, the build's venv."""
    base_env = build_environment(plan, environ, {})
    plan.log_file.parent.mkdir(parents=True, exist_ok=True)
    _clone(plan, runner, base_env, on_line)
    _fetch_optional(plan, runner, base_env, on_line)
    _dependencies(plan, runner, base_env, on_line)


def build_natively(
    plan: BuildPlan,
    runner: Runner,
    environ: Mapping[str, str],
    *,
    on_line: Note,
    on_note: Note,
) -> NativeResult:
    """Run the plan's commands on this machine (see the module docstring).

    Raises:
        CommandFailed: a step failed; the message names the log file.
        EnvironmentProblem: the venv cannot be created.
        UsageError: the sccache-dist token file is unreadable.
    """
    if plan.cache.dist is not None:  # an unreadable token file: say so before any work
        read_token(plan.cache.dist.settings, environ)
    base_env = build_environment(plan, environ, {})
    plan.log_file.parent.mkdir(parents=True, exist_ok=True)
    if plan.fresh and plan.work_dir.exists():
        on_note(f"--fresh: removing the build tree {plan.work_dir}")
        shutil.rmtree(plan.work_dir)
    plan.work_dir.mkdir(parents=True, exist_ok=True)
    _clone(plan, runner, base_env, on_line)
    _fetch_optional(plan, runner, base_env, on_line)
    _dependencies(plan, runner, base_env, on_line)
    cache, warning = start_cache(plan.cache, runner, base_env)
    if warning:
        on_note(warning)
    env = build_environment(plan, environ, cache.env)
    build = plan.command("build")
    assert build is not None
    argv = list(build.argv)
    if (
        cache.program != plan.cache.program
        and (plan.work_dir / "build" / "CMakeCache.txt").exists()
    ):
        argv.append("--rerun-cmake")  # the cached configuration names the launcher
    try:
        runner.stream(argv, cwd=plan.work_dir, env=env, log_file=plan.log_file, on_line=on_line)
    finally:
        stats = cache_stats(cache, runner, env)
        stop_cache(cache, runner, env)
    facts = _facts(plan, runner, env)
    if plan.cuda and plan.toolkit:
        facts["nvcc"] = plan.toolkit.split()[2] if plan.toolkit.startswith("local nvcc") else ""
    return NativeResult(stats, warning, facts)


def _facts(plan: BuildPlan, runner: Runner, env: Mapping[str, str]) -> dict[str, str]:
    """Versions of what built it: torch, git hash, compilers, CMake."""
    facts: dict[str, str] = {}
    version = plan.source_dir / "version.txt"
    if version.is_file():
        facts["torch_version"] = version.read_text(encoding="utf-8", errors="replace").strip()
    head = runner.run(
        ["git", "-C", str(plan.source_dir), "rev-parse", "HEAD"], check=False, env=env
    )
    if head.ok and head.stdout.strip():
        facts["git_hash"] = head.stdout.strip()
    elif (plan.source_dir / "torch" / "build-hash").is_file():
        facts["git_hash"] = (plan.source_dir / "torch" / "build-hash").read_text().strip()
    for name, argv in (("gcc", ["g++", "-dumpfullversion"]), ("cmake", ["cmake", "--version"])):
        if runner.which(argv[0]) is None:
            continue
        done = runner.run(argv, check=False, env=env)
        if done.ok and done.stdout.strip():
            facts[name] = done.stdout.strip().splitlines()[0].removeprefix("cmake version ")
    return facts


def collect_installed(source: Path, build_dir: Path, dest: Path) -> int:
    """Copy what CMake installed into ``<source>/torch`` (per install_manifest.txt) to ``dest``.

    Only this build's files are taken, never leftovers of an earlier configuration in the
    shared source tree. Without a manifest, ``torch/{lib,include,share}`` are copied.

    Returns:
        The number of files copied.
    """
    torch = (source / "torch").resolve()
    manifest = build_dir / "install_manifest.txt"
    dest.mkdir(parents=True, exist_ok=True)
    if not manifest.is_file():
        count = 0
        for part in ("lib", "include", "share"):
            if (torch / part).is_dir():
                shutil.copytree(torch / part, dest / part, symlinks=True, dirs_exist_ok=True)
                count += sum(1 for _ in (dest / part).rglob("*"))
        return count
    count = 0
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        path = Path(os.path.normpath(line.strip()))
        try:
            relative = path.relative_to(torch)
        except ValueError:
            continue
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            target.unlink(missing_ok=True)
            target.symlink_to(os.readlink(path))
        elif path.is_file():
            shutil.copy2(path, target)
        else:
            continue
        count += 1
    return count
