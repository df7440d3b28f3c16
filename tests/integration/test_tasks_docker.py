"""`fdl <command>` with `docker:` against a real engine and docker compose.

The image is built locally from the debootstrapped base image (no registry
pulls); a compose file bind-mounts the project. This machine itself has
/.dockerenv, so FDL_IN_CONTAINER=0 makes fdl wrap commands as on a host.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tasks_helpers import ADVERSARIAL, PRINT_ARGV, fake_libtorch, last_json, write

pytestmark = pytest.mark.docker

HOST = {"FDL_IN_CONTAINER": "0", "DOCKER_BUILDKIT": "0"}

DOCKERFILE = """\
FROM {base}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 \\
 && rm -rf /var/lib/apt/lists/*
"""

COMPOSE = """\
services:
  dev:
    image: {image}
    volumes:
      - .:/srv/proj
  lt:
    image: {image}
    volumes:
      - type: bind
        source: .
        target: /workspace
      - ${{LIBTORCH_CPU_PATH:-./libtorch/precompiled/cpu}}:/usr/local/libtorch:ro
"""

MANIFEST = """\
commands:
  argv: {run: python3 printargv.py, docker: dev}
  fail: {run: exit 7, docker: dev}
  stdin: {run: 'read line; echo "got $line"', docker: dev}
  cpu: {run: python3 printargv.py, docker: lt}
  sub:
"""

NESTED = """\
entry: python3 ../printargv.py
docker: dev
training: {epochs: 5}
commands:
  quick: {options: {model: lenet}, training: {epochs: 1}}
  where: {run: python3 ../printargv.py, docker: dev}
"""


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")  # as tests/conftest.py
    tag = f"fdl-test/tasks:{uuid.uuid4().hex[:10]}"
    context = tmp_path_factory.mktemp("image")
    (context / "Dockerfile").write_text(DOCKERFILE.format(base=base))
    build = subprocess.run(
        ["docker", "build", "-q", "-t", tag, str(context)],
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


@pytest.fixture
def project(tmp_path: Path, image: str) -> Iterator[Path]:
    root = write(
        tmp_path,
        {
            "printargv.py": PRINT_ARGV,
            "fdl.yml": MANIFEST,
            "docker-compose.yml": COMPOSE.format(image=image),
            "sub/fdl.yml": NESTED,
        },
    )
    fake_libtorch(root, "precompiled/cu128", cuda="12.8")
    # the active one: the service has no GPUs, and a service is given only a variant of
    # its own kind (a CUDA variant would leave it its image's libtorch)
    fake_libtorch(root, "precompiled/cpu", cuda=None)
    yield root
    subprocess.run(
        ["docker-compose", "down", "--remove-orphans"],
        cwd=root,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_argv_arrives_verbatim_with_libtorch_environment(project: Path, fdl_process) -> None:
    result = fdl_process(["argv", "--", *ADVERSARIAL], cwd=project, env=HOST, timeout=300)
    assert result.exit_code == 0, result.stderr
    data = last_json(result.stdout)
    cut = ADVERSARIAL.index("--")
    assert data["argv"] == [*ADVERSARIAL[:cut], "--", *ADVERSARIAL[cut + 1 :]]
    assert data["cwd"] == "/srv/proj"
    variant = "/srv/proj/libtorch/precompiled/cpu"
    env = data["env"]
    assert env["LIBTORCH"] == env["LIBTORCH_PATH"] == variant
    assert env["LD_LIBRARY_PATH"].split(":")[0] == f"{variant}/lib"
    assert env["CMAKE_PREFIX_PATH"].split(":")[0] == variant
    assert env["Torch_DIR"] == f"{variant}/share/cmake/Torch"
    assert "CUDA_VERSION" not in env and "CUDA_TAG" not in env  # a CPU build
    assert env["FDL_PROJECT_ROOT"] == "/srv/proj"


def test_nested_commands_run_in_their_directory_inside_the_container(
    project: Path, fdl_process
) -> None:
    result = fdl_process(["sub", "where", "--", "a b"], cwd=project / "sub", env=HOST, timeout=300)
    assert result.exit_code == 0, result.stderr
    data = last_json(result.stdout)
    assert (data["argv"], data["cwd"]) == (["a b"], "/srv/proj/sub")


def test_nested_entry_with_preset_in_the_container(project: Path, fdl_process) -> None:
    result = fdl_process(["sub", "quick", "--x", "it's"], cwd=project, env=HOST, timeout=300)
    assert result.exit_code == 0, result.stderr
    data = last_json(result.stdout)
    assert data["argv"] == ["--epochs", "1", "--model", "lenet", "--x", "it's"]
    assert data["cwd"] == "/srv/proj/sub"


def test_exit_code_propagates(project: Path, fdl_process) -> None:
    assert fdl_process(["fail"], cwd=project, env=HOST, timeout=300).exit_code == 7


def test_explicit_libtorch_mount_is_what_the_container_sees(project: Path, fdl_process) -> None:
    result = fdl_process(["cpu"], cwd=project, env=HOST, timeout=300)
    assert result.exit_code == 0, result.stderr
    env = last_json(result.stdout)["env"]
    assert env["LIBTORCH"] == "/usr/local/libtorch"
    assert env["LD_LIBRARY_PATH"].split(":")[0] == "/usr/local/libtorch/lib"
    assert "CUDA_VERSION" not in env  # the CPU variant is mounted there


def test_stdin_reaches_the_container(project: Path) -> None:
    env = {**os.environ, **HOST, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-m", "fdl", "stdin"],
        cwd=project,
        input="hello\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "got hello"


def test_terminal_reaches_an_interactive_container(project: Path) -> None:
    """An interactive command (a shell) gets a terminal in the container."""
    import pty

    write(project, {"fdl.yml": MANIFEST + "  shell: {run: sh, docker: dev}\n"})
    env = {**os.environ, **HOST, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(project)
        os.execve(sys.executable, [sys.executable, "-m", "fdl", "shell"], env)
    os.write(master, b"test -t 0 && echo TTY-IN-$((6*7)); exit 5\n")
    output = b""
    try:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    assert b"TTY-IN-42" in output
    assert os.waitstatus_to_exitcode(status) == 5
