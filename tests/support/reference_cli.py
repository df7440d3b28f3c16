"""floDl's own CLI (``flodl-cli`` 0.5.3, and 0.8.0 for its run-time contract, from
crates.io) beside fdl, under recording fakes.

The reference binary is installed by ``scripts/setup-reference-cli.sh`` into
``cache_dir()/tools/flodl-cli-<version>`` (asked here when it is missing: a test skips, or
fails in CI, when it cannot be built). It is also named ``fdl``, so it is called by its
path and its directory never goes on PATH.

:class:`Sandbox` gives both CLIs the same world: a HOME of its own (floDl's daily update
check and its offer to install itself globally land there; ``FDL_NO_UPDATE_CHECK=1``),
and fake ``docker``, ``cargo``, ``python``, ``python3``, ``bash`` first on PATH that append their
argv, working directory and the libtorch/CUDA/fdl variables they were given to a log and
exit 0, plus a ``curl`` that records and fails as an offline machine's does. floDl's CLI
runs ``docker:`` commands directly when ``/.dockerenv`` exists; both modes are made
explicit: floDl's CLI runs in a bubblewrap sandbox with or without that file, fdl with
``FDL_IN_CONTAINER=1`` or ``0``.

A recorded ``docker compose run`` is then read as a container would run it
(:func:`effects`): its service, the ``-e`` variables, and the script after it run by
``bash`` on the host with the same fakes, ``cd`` recorded instead of done, so the program,
arguments and directory that would run inside the container can be compared.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from tests.support.artefacts import cache_dir, skip_or_fail

__all__ = [
    "REFERENCE_VERSION",
    "Call",
    "Effect",
    "Outcome",
    "Sandbox",
    "effects",
    "installed_reference",
    "reference_binary",
]

REFERENCE_VERSION = "0.5.3"
CONTRACT_VERSION = "0.8.0"  # --gpus, FDL_GPU_FEATURE, docker: gpu, FDL_ENV (tests/integration)
REPO = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = REPO / "scripts" / "setup-reference-cli.sh"
# The variables a program's build or run reads that either CLI may set.
RECORDED = (
    "LIBTORCH",
    "CUDA_",
    "FDL_",
    "FLODL_",
    "Torch_DIR",
    "CMAKE_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "HIP_VISIBLE_DEVICES",
    "HOSTNAME",
)
# Set by the sandbox itself, not by either CLI.
_SANDBOX_VARS = (
    "FDL_NO_UPDATE_CHECK", "FDL_IN_CONTAINER", "FDL_PARITY_LOG", "FDL_NVML", "FDL_COMPOSE"
)  # fmt: skip
_FAKES = ("docker", "cargo", "python", "python3", "bash")

_RECORDER = """\
#!{python} -S
import json, os, sys
keep = {recorded!r}
env = {{k: v for k, v in sorted(os.environ.items()) if k.startswith(keep)}}
call = {{"program": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "cwd": os.getcwd(),
        "env": env}}
with open(os.environ["FDL_PARITY_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps(call) + "\\n")
if sys.argv[1:] == ["compose", "config", "--services"]:
    # floDl's CLI 0.8.0 asks this before `docker: gpu` picks `rocm` (run.rs:733-745): the
    # services of the compose file here (two-space keys under `services:`, as floDl writes)
    import re
    for name in ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"):
        if os.path.isfile(name):
            text = open(name, encoding="utf-8").read().split("\\nservices:\\n", 1)[-1]
            print("\\n".join(re.findall(r"^  ([A-Za-z0-9_.-]+):", text, re.M)))
            break
"""
# curl as on a machine without network: floDl's `init` asks crates.io for floDl's newest
# release and takes a git dependency when it cannot.
_OFFLINE_CURL = """\
#!/bin/sh
printf '%s\\n' "$*" >> "$(dirname "$0")/curl.log"
exit 7
"""
# `cd` inside the emulated container is recorded, not done (the paths are the container's).
_BASH_ENV = """\
cd() {
  case "$1" in
    /*) FDL_PARITY_CWD="$1" ;;
    *) FDL_PARITY_CWD="${FDL_PARITY_CWD%/}/$1" ;;
  esac
  export FDL_PARITY_CWD
}
"""


def _answers(binary: Path, version: str) -> bool:
    if not os.access(binary, os.X_OK):
        return False
    env = {"PATH": os.environ.get("PATH", ""), "FDL_NO_UPDATE_CHECK": "1", "HOME": "/nonexistent"}
    got = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, env=env, check=False
    )
    return got.stdout.strip() == f"flodl-cli {version}"


@functools.lru_cache(maxsize=2)
def installed_reference(version: str = REFERENCE_VERSION) -> tuple[Path | None, str]:
    """floDl's CLI ``version``, installed now if missing (``scripts/setup-reference-cli.sh``),
    or None and why not."""
    binary = cache_dir() / "tools" / f"flodl-cli-{version}" / "bin" / "fdl"
    if _answers(binary, version):
        return binary, ""
    env = dict(os.environ, FDL_TEST_CACHE=str(cache_dir()), FDL_REFERENCE_VERSION=version)
    try:
        got = subprocess.run(
            ["bash", str(SETUP_SCRIPT)], capture_output=True, text=True, env=env,
            timeout=3600, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"{SETUP_SCRIPT.name} ran for an hour"
    if got.returncode != 0 or not _answers(binary, version):
        return None, f"{SETUP_SCRIPT.name} failed: {got.stderr.strip()[-1200:]}"
    return binary, ""


def reference_binary(version: str = REFERENCE_VERSION) -> Path:
    """floDl's ``fdl`` ``version`` (0.5.3 unless said), installed once into the tests' cache
    (skips, or fails in CI, when it cannot be built)."""
    binary, problem = installed_reference(version)
    if binary is None:
        skip_or_fail(f"floDl's CLI {version} is not installed: {problem}")
    return binary


@functools.lru_cache(maxsize=1)
def _bwrap_problem(bwrap: str | None) -> str:
    """Why bubblewrap cannot make the sandbox here ("" when it can)."""
    if bwrap is None:
        return "bwrap is not on PATH (bash scripts/setup-machine.sh installs bubblewrap)"
    got = subprocess.run(
        [bwrap, *_bwrap_root(False), "true"], capture_output=True, text=True, check=False
    )
    if got.returncode != 0:
        return f"bwrap cannot make a sandbox here (user namespaces?): {got.stderr.strip()[-300:]}"
    return ""


def _bwrap_root(container: bool) -> list[str]:
    """bubblewrap options for this machine's root, with ``/.dockerenv`` only if ``container``."""
    argv = ["--die-with-parent"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in (".dockerenv", "proc", "dev"):
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry), str(entry)]
        else:
            argv += ["--bind", str(entry), str(entry)]
    argv += ["--proc", "/proc", "--dev-bind", "/dev", "/dev"]
    if container:
        argv += ["--ro-bind", "/dev/null", "/.dockerenv"]
    return argv


@dataclass(frozen=True)
class Call:
    """One recorded invocation of a fake program."""

    program: str
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str]


@dataclass(frozen=True)
class Outcome:
    """What one CLI invocation did: its exit code, output and the fakes' calls."""

    code: int
    stdout: str
    stderr: str
    calls: list[Call] = field(default_factory=list)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Sandbox:
    """A HOME and recording fakes on PATH, and runners for both CLIs inside them."""

    def __init__(self, root: Path, version: str = REFERENCE_VERSION) -> None:
        self.root = root
        self.version = version
        self.home = root / "home"
        self.bin = root / "bin"
        self.home.mkdir(parents=True, exist_ok=True)
        self.bin.mkdir(parents=True, exist_ok=True)
        recorder = _RECORDER.format(python=sys.executable, recorded=RECORDED)
        for name in _FAKES:
            (self.bin / name).write_text(recorder, encoding="utf-8")
            (self.bin / name).chmod(0o755)
        (self.bin / "curl").write_text(_OFFLINE_CURL, encoding="utf-8")
        (self.bin / "curl").chmod(0o755)
        self.bash_env = root / "bash_env.sh"
        self.bash_env.write_text(_BASH_ENV, encoding="utf-8")
        self.log = root / "calls.jsonl"
        self._bwrap = shutil.which("bwrap")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment both CLIs run in: nothing of the test process's but PATH."""
        path = os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"])
        env = {
            "PATH": path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            "FDL_NO_UPDATE_CHECK": "1",
            "FDL_PARITY_LOG": str(self.log),
            "FDL_NVML": "0",
        }
        env.update(extra)
        return env

    def _take_calls(self) -> list[Call]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        self.log.unlink()
        return [_call(json.loads(line)) for line in lines]

    def _run(self, argv: list[str], cwd: Path, env: dict[str, str]) -> Outcome:
        self._take_calls()
        got = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        return Outcome(got.returncode, got.stdout, got.stderr, self._take_calls())

    def reference(self, args: list[str], cwd: Path, *, container: bool = False) -> Outcome:
        """floDl's CLI, on a root with ``/.dockerenv`` only when ``container``."""
        problem = _bwrap_problem(self._bwrap)
        if problem:
            skip_or_fail(problem)
        argv = [self._bwrap, *_bwrap_root(container), "--chdir", str(cwd)]
        return self._run([*argv, str(reference_binary(self.version)), *args], cwd, self.env())

    def ours(self, args: list[str], cwd: Path, *, container: bool = False) -> Outcome:
        """This checkout's fdl (``python -m fdl``), told whether it is in a container.

        ``FDL_COMPOSE`` names the compose program floDl's CLI always runs (``docker
        compose``), so that fdl does not ask the fake docker which one to use."""
        env = self.env(
            FDL_IN_CONTAINER="1" if container else "0",
            FDL_COMPOSE="docker compose",
            PYTHONPATH=str(REPO),
        )
        return self._run([sys.executable, "-m", "fdl", *args], cwd, env)

    def script(self, text: str, cwd: Path) -> Outcome:
        """A shell script (fdl's ``--dry-run`` output) run by ``sh`` in the sandbox."""
        return self._run(["sh", "-c", text], cwd, self.env())

    def inside(self, script: list[str], cwd: str, env: dict[str, str]) -> list[Call]:
        """What ``bash -c`` (or ``sh -c``, by this machine's sh) of a container would run:
        ``cd`` recorded in bash, programs faked."""
        full = self.env(BASH_ENV=str(self.bash_env), FDL_PARITY_CWD=cwd, **env)
        shell = "/bin/sh" if script[0] == "sh" else "/bin/bash"
        self._take_calls()
        subprocess.run(
            [shell, *script[1:]], cwd=self.root, env=full, capture_output=True, timeout=60,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        return self._take_calls()


def _call(data: dict[str, object]) -> Call:
    env = {k: str(v) for k, v in dict(data["env"]).items() if k not in _SANDBOX_VARS}  # type: ignore[call-overload]
    return Call(str(data["program"]), tuple(data["argv"]), str(data["cwd"]), env)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Effect:
    """What a program run amounts to, wherever it ran.

    ``where`` is ``host`` (run directly) or ``service:<name>`` (``docker compose run``);
    ``cwd`` the program's directory (the container's for a service), ``env`` the recorded
    variables the program saw, ``compose`` the compose call's own variables (with relative
    paths resolved against the compose file's directory, as compose resolves them) and
    ``project`` the directory of the compose file compose finds.
    """

    where: str
    program: str
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str]
    compose: dict[str, str] = field(default_factory=dict)
    project: str = ""


_COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
_VALUE_OPTIONS = {"-e", "--env", "-w", "--workdir", "-u", "--user", "--name", "--entrypoint",
                  "-v", "--volume", "-p", "--publish", "-l", "--label"}  # fmt: skip


def _compose_file(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        for name in _COMPOSE_FILES:
            if (folder / name).is_file():
                return folder / name
    return None


def _service(compose: Path | None, service: str) -> dict[str, object]:
    if compose is None:
        return {}
    data = yaml.safe_load(compose.read_text(encoding="utf-8")) or {}
    return dict((data.get("services") or {}).get(service) or {})


def _service_env(spec: dict[str, object], host: dict[str, str]) -> dict[str, str]:
    """The service's ``environment:`` as compose gives it (a bare name: the host's value)."""
    listed = spec.get("environment") or {}
    pairs = listed.items() if isinstance(listed, dict) else (
        (item.partition("=")[0], item.partition("=")[2] if "=" in item else None)
        for item in map(str, listed)  # type: ignore[call-overload]
    )  # fmt: skip
    env = {}
    for key, value in pairs:
        if value is None:
            if key in host:
                env[key] = host[key]
        else:
            env[key] = str(value)
    return {k: v for k, v in env.items() if k.startswith(RECORDED)}


def effects(sandbox: Sandbox, calls: list[Call]) -> list[Effect]:
    """The programs the calls amount to: direct calls as they are, each ``docker compose
    run`` as its container would run it; other docker calls (fdl's engine probes) left out."""
    found: list[Effect] = []
    for call in calls:
        if call.program != "docker":
            found.append(Effect("host", call.program, call.argv, call.cwd, call.env))
            continue
        words = list(call.argv)
        while words[:1] == ["compose"] and words[1:2] == ["-f"]:  # floDl 0.8's cluster
            del words[1:3]  # overlay (extra_hosts): the service and its command are the same
        if words[:2] != ["compose", "run"]:
            continue
        found.extend(_container_effects(sandbox, replace(call, argv=tuple(words))))
    return found


def _container_effects(sandbox: Sandbox, call: Call) -> list[Effect]:
    words, index, options = list(call.argv[2:]), 0, {}
    container_env: dict[str, str] = {}
    while index < len(words) and words[index].startswith("-"):
        word = words[index]
        if word in _VALUE_OPTIONS:
            value = words[index + 1]
            if word in ("-e", "--env"):
                key, equals, text = value.partition("=")
                if equals or key in call.env:  # a bare `-e NAME`: compose's own value
                    container_env[key] = text if equals else call.env[key]
            options[word] = value
            index += 2
        else:
            index += 1
    service, command = words[index], words[index + 1 :]
    compose = _compose_file(Path(call.cwd))
    project = str(compose.parent) if compose else call.cwd
    host = {
        key: str((Path(project) / value).resolve()) if value.startswith("./") else value
        for key, value in call.env.items()
        if key not in ("FDL_UID", "FDL_GID")
    }
    spec = _service(compose, service)
    container_env = {**_service_env(spec, call.env), **container_env}
    cwd = options.get("-w") or options.get("--workdir") or str(spec.get("working_dir") or "/")
    where = f"service:{service}"
    if len(command) >= 3 and command[0] in ("bash", "sh") and command[1] == "-c":
        inner = sandbox.inside(command, cwd, container_env)
        return [
            Effect(
                where,
                c.program,
                c.argv,
                posixpath.normpath(c.env.get("FDL_PARITY_CWD", cwd)),
                {k: v for k, v in c.env.items() if k != "FDL_PARITY_CWD"},
                host,
                project,
            )
            for c in inner
        ]
    return [Effect(where, command[0] if command else "", tuple(command[1:]), cwd,
                   container_env, host, project)]  # fmt: skip


def describe(effect: Effect) -> str:
    """One line for an assertion message."""
    words = shlex.join([effect.program, *effect.argv])
    return f"[{effect.where} in {effect.cwd}] {words}"
