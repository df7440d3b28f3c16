"""The build tools on this machine: nvcc (and the archs it accepts), compilers, cmake, ...

Every probe goes through the Runner seam and returns a :class:`~fdl.system.probe.Probe`:
a value, or the reason it could not tell. A missing tool is an answer, never an exception.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fdl.compat.archs import ArchList, Capability, Kind, Target
from fdl.compat.cuda import toolkit
from fdl.errors import FdlError
from fdl.runner import Runner, default_runner
from fdl.system.probe import Probe

__all__ = [
    "DockerInfo",
    "NvccInfo",
    "ToolVersion",
    "Toolchain",
    "find_cuda_home",
    "is_cuda_home",
    "probe_docker",
    "probe_nvcc",
    "probe_tool",
    "probe_toolchain",
    "rust_toolchain_file_problem",
]

# How each tool prints its version (searched in stdout + stderr of `<tool> --version`).
_VERSION_PATTERNS: dict[str, str] = {
    # "gcc (Debian 12.2.0-14) 12.2.0", "gcc (GCC) 14.2.1 20250110"
    "gcc": r"\)\s+(\d+\.\d+(?:\.\d+)?)",
    "g++": r"\)\s+(\d+\.\d+(?:\.\d+)?)",
    "clang": r"clang version (\d+\.\d+(?:\.\d+)?)",
    "cmake": r"cmake version (\d+\.\d+(?:\.\d+)?)",
    "python3": r"Python (\d+\.\d+(?:\.\d+)?)",
    "git": r"git version (\d+\.\d+(?:\.\d+)?)",
    "ninja": r"^(\d+\.\d+(?:\.\d+)?)",
    "ccache": r"ccache version (\d+\.\d+(?:\.\d+)?)",
    "sccache": r"sccache (\d+\.\d+(?:\.\d+)?)",
    "docker": r"version (\d+\.\d+(?:\.\d+)?)",
}
_NVCC_VERSION = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_GPU_CODE = re.compile(r"\bsm_(\d+)([af]?)\b")
_TIMEOUT = 30.0


@dataclass(frozen=True)
class ToolVersion:
    """A program and its version (``12.2.0``)."""

    name: str
    version: str
    path: str

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])


@dataclass(frozen=True)
class NvccInfo:
    """The CUDA compiler and what it can target.

    Attributes:
        version: ``13.0``; full_version: ``13.0.88``.
        targets: cubin targets it accepts (PTX for the same archs is accepted too).
        targets_source: Where ``targets`` came from (nvcc itself or fdl's table).
    """

    version: str
    full_version: str
    path: str
    targets: ArchList
    targets_source: str


@dataclass(frozen=True)
class DockerInfo:
    """The docker CLI and whether a daemon answers (a light probe)."""

    cli_version: str
    daemon: bool
    server_version: str | None
    reason: str | None
    in_container: bool


@dataclass(frozen=True)
class Toolchain:
    """Every build tool probe, by name (``gcc``, ``cmake``, ...), plus nvcc and docker."""

    nvcc: Probe[NvccInfo]
    docker: Probe[DockerInfo]
    tools: dict[str, Probe[ToolVersion]]

    def __getitem__(self, name: str) -> Probe[ToolVersion]:
        return self.tools[name]


def _run_text(runner: Runner, argv: list[str]) -> tuple[int, str] | str:
    """(status, output) of a command, or the reason it could not run."""
    try:
        result = runner.run(argv, check=False, timeout=_TIMEOUT)
    except FdlError as exc:
        return f"`{' '.join(argv)}` could not run: {exc.message}"
    return result.returncode, (result.stdout or "") + (result.stderr or "")


_RUST_TOOLCHAIN_FILES = ("rust-toolchain.toml", "rust-toolchain")


def rust_toolchain_file_problem(directory: Path) -> str | None:
    """Why rustup's proxies (``cargo``, ``rustc``) must not be run in ``directory``, if so.

    rustup reads the first ``rust-toolchain[.toml]`` of ``directory`` and its ancestors
    whole, before anything else: a FIFO there blocks it for ever, a link to
    ``/dev/zero`` fills the memory. fdl looks first and says what stands there.
    """
    import stat

    for folder in (directory, *directory.parents):
        for name in _RUST_TOOLCHAIN_FILES:
            path = folder / name
            try:
                info = path.stat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                return f"{path} cannot be read: {exc.strerror or exc}"
            if stat.S_ISREG(info.st_mode) and info.st_size <= 1 << 16:
                return None
            if stat.S_ISDIR(info.st_mode):
                continue  # rustup skips a directory of that name
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else f"{info.st_size} bytes"
                if stat.S_ISREG(info.st_mode)
                else "a device or special file"
            )
            return f"{path} is {kind}, not a toolchain file (rustup would read it whole)"
    return None


def probe_tool(name: str, runner: Runner | None = None) -> Probe[ToolVersion]:
    """The version of ``name`` (one of gcc, g++, clang, cmake, python3, git, ninja, ccache,
    sccache, docker), or why it is unknown."""
    run = runner or default_runner()
    path = run.which(name)
    if path is None:
        return Probe.missing(f"{name} not found on PATH")
    answer = _run_text(run, [name, "--version"])
    if isinstance(answer, str):
        return Probe.missing(answer, path)
    status, output = answer
    first = output.strip().splitlines()[0] if output.strip() else ""
    if status != 0:
        return Probe.missing(f"`{name} --version` exited with status {status}: {first}", path)
    pattern = re.compile(_VERSION_PATTERNS.get(name, r"(\d+\.\d+(?:\.\d+)?)"), re.MULTILINE)
    match = pattern.search(first) or pattern.search(output)
    if match is None:
        return Probe.missing(f"cannot read a version from `{name} --version`: {first!r}", path)
    return Probe(ToolVersion(name, match.group(1), path), path=path)


def _nvcc_path(runner: Runner, cuda_home: Path | None) -> str | None:
    found = runner.which("nvcc")
    if found is not None:
        return found
    homes = [cuda_home] if cuda_home else [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))]
    for home in homes:
        candidate = home / "bin" / "nvcc"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


_TOP = re.compile(r"^#\$ TOP=(.+)$", re.M)
_LIB_DIRS = ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")


def is_cuda_home(path: Path) -> bool:
    """Whether ``path`` is a CUDA toolkit root a build can use: the runtime's header and
    library are there (CMake's FindCUDAToolkit looks for both)."""
    if not (path / "include" / "cuda_runtime.h").is_file():
        return False
    return any(any((path / d).glob("libcudart.so*")) for d in _LIB_DIRS)


def find_cuda_home(
    nvcc: str, runner: Runner | None = None, environ: dict[str, str] | None = None
) -> Probe[Path]:
    """The toolkit root that goes with ``nvcc`` (what ``CUDA_HOME`` must be for a build).

    Looked for in order: ``$CUDA_HOME`` and ``$CUDA_PATH``; ``TOP`` from ``nvcc --dryrun``
    (right also for a wrapper script such as ``/usr/local/bin/nvcc`` that execs the real
    one); the real path of ``nvcc`` two levels up; ``/usr/local/cuda``. The first that holds
    ``include/cuda_runtime.h`` and ``libcudart`` wins.
    """
    run = runner or default_runner()
    env = os.environ if environ is None else environ
    candidates: list[tuple[Path, str]] = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(variable):
            candidates.append((Path(env[variable]), f"${variable}"))
    answer = _run_text(run, [nvcc, "--dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"])
    if not isinstance(answer, str):
        found = _TOP.search(answer[1])
        if found:
            candidates.append((Path(found.group(1).strip()), "nvcc --dryrun"))
    candidates.append((Path(nvcc).resolve().parent.parent, "the real path of nvcc"))
    candidates.append((Path("/usr/local/cuda"), "/usr/local/cuda"))
    tried: list[str] = []
    for path, how in candidates:
        try:
            root = path.resolve()
        except OSError:
            continue
        if is_cuda_home(root):
            return Probe(root, path=how)
        tried.append(f"{path} ({how})")
    return Probe.missing(
        "no CUDA toolkit root with include/cuda_runtime.h and libcudart found for "
        f"{nvcc}; tried {', '.join(tried)}"
    )


def probe_nvcc(runner: Runner | None = None, *, cuda_home: Path | None = None) -> Probe[NvccInfo]:
    """nvcc's version and the archs it accepts.

    The arch list comes from ``nvcc --list-gpu-code`` (which omits ``a``/``f`` targets: those
    are added from fdl's table), or from the table alone when nvcc cannot list them.
    """
    run = runner or default_runner()
    path = _nvcc_path(run, cuda_home)
    if path is None:
        return Probe.missing("nvcc not found on PATH nor in $CUDA_HOME/bin (no CUDA toolkit)")
    program = "nvcc" if run.which("nvcc") else path
    answer = _run_text(run, [program, "--version"])
    if isinstance(answer, str):
        return Probe.missing(answer, path)
    status, output = answer
    match = _NVCC_VERSION.search(output)
    if status != 0 or match is None:
        return Probe.missing(
            f"cannot read the version from `nvcc --version` (status {status})", path
        )
    version, full = match.group(1), match.group(2)
    targets, source = _nvcc_targets(run, program, version)
    return Probe(NvccInfo(version, full, path, targets, source), path=path)


def _nvcc_targets(runner: Runner, program: str, version: str) -> tuple[ArchList, str]:
    try:
        table = toolkit(version).targets
    except FdlError:
        table = ArchList()
    answer = _run_text(runner, [program, "--list-gpu-code"])
    if not isinstance(answer, str) and answer[0] == 0:
        listed = [
            Target(Capability.from_number(int(num)), Kind.CUBIN, suffix)
            for num, suffix in _GPU_CODE.findall(answer[1])
        ]
        if listed:
            extra = [t for t in table if t.suffix and Target(t.capability) in listed]
            source = "nvcc --list-gpu-code" + (" + a/f targets from fdl's table" if extra else "")
            return ArchList.of([*listed, *extra]), source
    if table:
        return table, f"fdl's table for CUDA {version} (nvcc could not list its archs)"
    return (
        ArchList(),
        f"unknown: nvcc cannot list its archs and fdl has no table for CUDA {version}",
    )


def probe_docker(runner: Runner | None = None) -> Probe[DockerInfo]:
    """The docker CLI version and whether its daemon answers (no images, no containers)."""
    run = runner or default_runner()
    cli = probe_tool("docker", run)
    if cli.value is None:
        return Probe.missing(cli.reason or "docker not found", cli.path)
    in_container = Path("/.dockerenv").exists()
    answer = _run_text(run, ["docker", "version", "--format", "{{.Server.Version}}"])
    if isinstance(answer, str):
        info = DockerInfo(cli.value.version, False, None, answer, in_container)
    elif answer[0] == 0 and answer[1].strip():
        info = DockerInfo(
            cli.value.version, True, answer[1].strip().splitlines()[0], None, in_container
        )
    else:
        last = answer[1].strip().splitlines()[-1:] or ["no answer"]
        info = DockerInfo(
            cli.value.version, False, None, f"the daemon does not answer: {last[0]}", in_container
        )
    return Probe(info, path=cli.path)


_TOOLS = ("gcc", "g++", "clang", "cmake", "python3", "git", "ninja", "ccache", "sccache")


def probe_toolchain(runner: Runner | None = None, *, cuda_home: Path | None = None) -> Toolchain:
    """Probe every build tool (in parallel; each probe is a ``--version`` call)."""
    run = runner or default_runner()
    with ThreadPoolExecutor(max_workers=6) as pool:
        nvcc = pool.submit(probe_nvcc, run, cuda_home=cuda_home)
        docker = pool.submit(probe_docker, run)
        tools = {name: pool.submit(probe_tool, name, run) for name in _TOOLS}
        return Toolchain(nvcc.result(), docker.result(), {n: f.result() for n, f in tools.items()})
