"""What a user sees when docker fails: the right error type, docker's words, a fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.engine import BuildSpec, DockerEngine, RunSpec
from fdl.engine._facts import docker_facts, translate_failure
from fdl.errors import CommandFailed, EnvironmentProblem, NetworkError
from fdl.runner import SubprocessRunner
from tests.support.fake_docker import FakeDocker, make_fake_docker


@pytest.fixture
def docker(tmp_path: Path) -> FakeDocker:
    return make_fake_docker(tmp_path / "bin", version="20.10.24")


@pytest.fixture
def engine(docker: FakeDocker) -> DockerEngine:
    return DockerEngine(SubprocessRunner(), {"PATH": str(docker.folder)})


def failed(tail: str) -> CommandFailed:
    return CommandFailed(["docker", "build", "."], 1, output_tail=tail)


def test_daemon_down_is_an_environment_problem_with_a_fix() -> None:
    error = translate_failure(
        failed("Cannot connect to the Docker daemon at unix:///var/run/docker.sock."), "building a"
    )
    assert isinstance(error, EnvironmentProblem)
    assert error.message == "building a failed: the docker daemon does not answer"
    assert "systemctl start docker" in (error.hint or "")


def test_registry_unreachable_is_a_network_error() -> None:
    tail = 'failed to do request: Head "https://registry-1.docker.io/v2/": dial tcp: i/o timeout'
    error = translate_failure(failed(tail), "pushing a")
    assert isinstance(error, NetworkError)
    assert error.details == tail


def test_unknown_failure_keeps_docker_output_and_the_callers_hint() -> None:
    error = translate_failure(failed("something odd"), "tagging a", hint="try b")
    assert isinstance(error, CommandFailed)
    assert error.message == "tagging a failed: docker exited with status 1"
    assert error.details == "something odd"
    assert error.hint == "try b"


def test_failed_build_step_shows_dockers_last_lines(
    tmp_path: Path, docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond(
        "build",
        stdout="#6 [stage-0 2/2] RUN exit 1\n"
        "#6 ERROR: executor failed running [/bin/sh -c exit 1]: exit code: 1\n",
        rc=1,
    )
    lines: list[str] = []

    with pytest.raises(CommandFailed) as caught:
        engine.build(
            BuildSpec(tmp_path, dockerfile_text="FROM a\nRUN exit 1\n", tags=("a:1",)),
            on_line=lines.append,
            log_file=tmp_path / "build.log",
        )

    error = caught.value
    assert error.message.startswith("building a:1 failed: docker exited with status 1")
    assert f"(full log: {tmp_path / 'build.log'})" in error.message
    assert "executor failed running [/bin/sh -c exit 1]" in (error.details or "")
    assert "re-run reuses the cached steps" in (error.hint or "")
    assert lines[-1].startswith("#6 ERROR")
    assert "exit code: 1" in (tmp_path / "build.log").read_text()


def test_missing_context_and_dockerfile(tmp_path: Path, engine: DockerEngine) -> None:
    with pytest.raises(EnvironmentProblem, match="is not a directory"):
        engine.build(BuildSpec(tmp_path / "nope"))
    with pytest.raises(EnvironmentProblem, match=r"Dockerfile .*Dockerfile does not exist"):
        engine.build(BuildSpec(tmp_path))


def test_gpus_without_nvidia_runtime(docker: FakeDocker, engine: DockerEngine) -> None:
    docker.respond(
        "run",
        stderr='docker: Error response from daemon: could not select device driver "" with '
        "capabilities: [[gpu]].",
        rc=125,
    )

    with pytest.raises(EnvironmentProblem) as caught:
        engine.run(RunSpec("img:1", ("nvidia-smi",), gpus="all"))

    assert caught.value.message == "running img:1 failed: docker cannot give the container GPUs"
    assert "NVIDIA Container Toolkit" in (caught.value.hint or "")
    (call,) = docker.calls_of("run")
    assert call[call.index("--gpus") + 1] == "all"


def test_a_failing_container_is_a_result_not_an_error(
    docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond("run", stdout="out\n", stderr="err\n", rc=3)

    captured = engine.run(RunSpec("img:1", ("false",)))
    streamed: list[str] = []
    merged = engine.run(RunSpec("img:1", ("false",)), on_line=streamed.append)

    assert (captured.exit_code, captured.stdout, captured.stderr) == (3, "out\n", "err\n")
    assert merged.exit_code == 3
    assert sorted(streamed) == ["err", "out"]
    assert "--gpus" not in docker.calls_of("run")[0]


def test_image_exists_answers_no_for_a_missing_image(
    docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond("image", stdout="[{}]\n")
    assert engine.image_exists("there:1") is True
    docker.respond("image", stderr="Error: No such image: nope:1", rc=1)
    assert engine.image_exists("nope:1") is False
    assert engine.remove_image("nope:1") is False


def test_image_exists_does_not_hide_a_daemon_failure(
    docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond(
        "image",
        stderr="permission denied while trying to connect to the Docker daemon socket",
        rc=1,
    )
    with pytest.raises(EnvironmentProblem, match="no permission to use the docker daemon"):
        engine.image_exists("a:1")


def test_copy_out_of_a_missing_path_removes_the_container(
    tmp_path: Path, docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond("create", stdout="cid123\n")
    docker.respond("cp", stderr="Error: No such container:path: cid123:/nope/.", rc=1)

    with pytest.raises(EnvironmentProblem) as caught:
        engine.copy_out("img:1", "/nope", tmp_path / "out")

    assert (
        caught.value.message
        == "copying /nope out of img:1 failed: /nope does not exist in the image"
    )
    assert docker.calls()[-1] == ["rm", "--force", "cid123"]


def test_copy_out_of_a_file_falls_back_to_copying_the_file(
    tmp_path: Path, docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond("create", stdout="cid9\n")
    docker.respond("cp", stderr="lstat /var/lib/docker/x/etc/os-release/.: not a directory", rc=1)

    with pytest.raises(CommandFailed):
        engine.copy_out("img:1", "/etc/os-release", tmp_path / "out")

    copies = docker.calls_of("cp")
    assert copies == [
        ["cp", "cid9:/etc/os-release/.", str(tmp_path / "out")],
        ["cp", "cid9:/etc/os-release", str(tmp_path / "out")],
    ]
    assert docker.calls()[-1] == ["rm", "--force", "cid9"]


def test_every_known_failure_has_a_kind_a_message_and_a_fix() -> None:
    facts = docker_facts()
    assert facts.builtin_buildkit_before == (23, 0)
    for failure in facts.failures:
        assert failure.kind in {"environment", "network", "failure"}, failure
        assert failure.message and failure.hint, failure
    matches = [f.match.lower() for f in facts.failures]
    assert len(matches) == len(set(matches))


def test_engine_reads_its_own_environment_not_the_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_DOCKER", str(tmp_path / "not-there"))
    docker = make_fake_docker(tmp_path / "bin")
    engine = DockerEngine(SubprocessRunner(), {"PATH": str(docker.folder)})

    engine.tag("a:1", "b:1")

    assert docker.calls()[-1] == ["tag", "a:1", "b:1"]


def test_interactive_run_attaches_the_terminal_and_returns_the_exit_code(
    docker: FakeDocker, engine: DockerEngine
) -> None:
    docker.respond("run", rc=4)

    result = engine.run(RunSpec("img:1", ("bash",), interactive=True, tty=True))

    assert (result.exit_code, result.stdout) == (4, "")
    (call,) = docker.calls_of("run")
    assert call[:4] == ["run", "--rm", "--interactive", "--tty"]


def test_buildx_build_reports_the_loaded_images_id(tmp_path: Path) -> None:
    modern = make_fake_docker(tmp_path / "bin", buildx=True)
    modern.respond("image", stdout="sha256:loaded\n")
    engine = DockerEngine(SubprocessRunner(), {"PATH": str(modern.folder)})

    result = engine.build(BuildSpec(tmp_path, dockerfile_text="FROM a\n", tags=("a:1",)))

    assert result.image_id == "sha256:loaded"
    assert modern.calls()[-1] == ["image", "inspect", "--format", "{{.Id}}", "a:1"]


def test_syntax_too_new_for_a_builtin_buildkit_says_what_to_avoid() -> None:
    tail = (
        "failed to solve with frontend dockerfile.v0: failed to create LLB definition: "
        "dockerfile parse error line 2: Unknown flag: link"
    )
    error = translate_failure(failed(tail), "building a")
    assert isinstance(error, CommandFailed)
    assert "COPY --link" in (error.hint or "")
    assert error.details == tail
