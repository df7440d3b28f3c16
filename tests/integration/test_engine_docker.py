"""The docker engine against the real daemon: builds with BuildKit mounts and secrets,
inspection, runs, copying out, the build cache, compose, and a classic-only client.

Images are built FROM the local base image (no registry pulls), named uniquely per
run and removed afterwards.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdl.engine import (
    Builder,
    BuildResult,
    BuildSpec,
    DockerEngine,
    Mount,
    RunSpec,
    Secret,
)
from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.runner import SubprocessRunner
from tests.support.fake_docker import make_fake_docker

pytestmark = pytest.mark.docker

RUN_ID = uuid.uuid4().hex[:10]
# tests/conftest.py's base_image fixture is per test; the module-wide build needs it earlier.
BASE_IMAGE = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")
SECRET = f"s3cr3t-{RUN_ID}-value"

DOCKERFILE = f"""\
ARG BASE
FROM ${{BASE}}
RUN --mount=type=cache,target=/cache,id=fdl-engine-test-{RUN_ID} \\
    sh -c 'echo first >> /cache/first && mkdir -p /app && wc -l < /cache/first > /app/first-runs'
COPY input.txt /app/input.txt
RUN --mount=type=cache,target=/cache,id=fdl-engine-test-{RUN_ID} \\
    sh -c 'echo again >> /cache/again && wc -l < /cache/again > /app/again-runs'
RUN --mount=type=secret,id=token,required=true \\
    sha256sum /run/secrets/token | cut -d' ' -f1 > /app/token.sha256
LABEL org.fdl.test.dockerfile=yes
"""


@dataclass
class Built:
    """The image the module builds, and where from."""

    engine: DockerEngine
    context: Path
    result: BuildResult
    spec: BuildSpec
    lines: list[str]


@pytest.fixture(scope="module")
def engine() -> DockerEngine:
    return DockerEngine(SubprocessRunner())


@pytest.fixture(scope="module")
def made_images(engine: DockerEngine) -> Iterator[list[str]]:
    """Names of images tests create; removed when the module is done."""
    names: list[str] = []
    yield names
    for name in names:
        engine.remove_image(name, force=True)


@pytest.fixture(scope="module")
def built(
    engine: DockerEngine,
    made_images: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Built:
    context = tmp_path_factory.mktemp("ctx")
    (context / "input.txt").write_text("one\n")
    secret = tmp_path_factory.mktemp("secret") / "token"  # outside the context
    secret.write_text(SECRET)
    tag = f"fdl-engine-test/app:{RUN_ID}"
    made_images.append(tag)
    spec = BuildSpec(
        context,
        dockerfile_text=DOCKERFILE,
        tags=(tag,),
        build_args={"BASE": BASE_IMAGE},
        labels={"org.fdl.test.run": RUN_ID},
        secrets={"token": Secret(file=secret)},
    )
    lines: list[str] = []
    result = engine.build(spec, on_line=lines.append)
    return Built(engine, context, result, spec, lines)


def test_build_with_cache_and_secret_mounts_uses_buildkit(built: Built) -> None:
    assert built.result.builder is not Builder.CLASSIC
    assert built.result.image_id.startswith("sha256:")
    assert built.engine.image_exists(built.result.tags[0])
    assert any("RUN --mount=type=secret" in line for line in built.lines)


def test_the_secret_was_there_during_the_build_but_is_not_in_the_image(built: Built) -> None:
    image = built.result.tags[0]
    engine = built.engine
    hashed = engine.run(RunSpec(image, ("cat", "/app/token.sha256")))
    assert hashed.stdout.strip() == hashlib.sha256(SECRET.encode()).hexdigest()

    search = engine.run(
        RunSpec(
            image,
            (
                "grep",
                "-rlF",
                "--exclude-dir=proc",
                "--exclude-dir=sys",
                "--exclude-dir=dev",
                SECRET,
                "/",
            ),
        )
    )
    assert search.exit_code == 1, search.stdout  # grep: nothing found
    info = engine.inspect_image(image)
    history = "\n".join(layer.created_by for layer in info.layers)
    assert SECRET not in history
    assert SECRET not in repr(info)
    leftovers = engine.run(
        RunSpec(image, ("sh", "-c", "find /cache /run/secrets -mindepth 1 2>/dev/null | wc -l"))
    )
    assert leftovers.stdout.strip() == "0"


def test_inspect_reports_labels_size_and_layers(built: Built, base_image: str) -> None:
    engine = built.engine
    info = engine.inspect_image(built.result.tags[0])
    base = engine.inspect_image(base_image)

    assert info.id == built.result.image_id
    assert info.labels["org.fdl.test.run"] == RUN_ID
    assert info.labels["org.fdl.test.dockerfile"] == "yes"
    assert info.size > base.size
    assert info.architecture and info.os == "linux"
    assert "PATH" in info.env
    steps = [layer.created_by for layer in info.layers]
    assert any("wc -l < /cache/first" in step for step in steps)
    assert any("COPY input.txt /app/input.txt" in step for step in steps)
    copied = next(layer for layer in info.layers if "COPY input.txt" in layer.created_by)
    assert copied.size == len("one\n")

    usage = engine.disk_usage(built.result.tags[0])
    assert usage.size == info.size
    assert usage.shared_size >= base.size
    assert 0 < usage.unique_size < 10_000


def test_run_returns_exit_code_and_output(built: Built) -> None:
    image = built.result.tags[0]
    command = ("sh", "-c", "cat /app/input.txt; echo to-stderr >&2; exit 7")

    captured = built.engine.run(RunSpec(image, command))
    lines: list[str] = []
    streamed = built.engine.run(RunSpec(image, command), on_line=lines.append)

    assert (captured.exit_code, captured.stdout, captured.stderr) == (7, "one\n", "to-stderr\n")
    assert streamed.exit_code == 7
    assert sorted(lines) == ["one", "to-stderr"]


def test_run_with_env_mounts_user_and_workdir(built: Built, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("host data\n")
    tmp_path.chmod(0o755)  # readable by the container's user 1234
    result = built.engine.run(
        RunSpec(
            built.result.tags[0],
            ("sh", "-c", 'echo "$GREETING $(id -u) $(pwd)"; cat /data/data.txt; touch /data/x'),
            mounts=(Mount(str(tmp_path), "/data", read_only=True),),
            env={"GREETING": "hello"},
            user="1234",
            workdir="/app",
            network="none",
        )
    )
    assert result.stdout.splitlines()[:2] == ["hello 1234 /app", "host data"]
    assert result.exit_code != 0  # the mount is read-only
    assert not (tmp_path / "x").exists()


def test_run_of_a_missing_image_is_an_error_not_an_exit_code(engine: DockerEngine) -> None:
    with pytest.raises(CommandFailed) as caught:
        engine.run(RunSpec(f"fdl-engine-test/missing:{RUN_ID}", ("true",), pull="never"))
    assert caught.value.message == (
        f"running fdl-engine-test/missing:{RUN_ID} failed: no such image"
    )
    assert "build it first" in (caught.value.hint or "")


def test_copy_out_a_directory_and_a_file(built: Built, tmp_path: Path) -> None:
    engine = built.engine
    out = engine.copy_out(built.result.tags[0], "/app", tmp_path / "app")
    assert sorted(p.name for p in out.iterdir()) == [
        "again-runs",
        "first-runs",
        "input.txt",
        "token.sha256",
    ]
    assert (out / "input.txt").read_text() == "one\n"

    single = engine.copy_out(built.result.tags[0], "/app/input.txt", tmp_path / "single")
    assert [p.name for p in single.iterdir()] == ["input.txt"]

    with pytest.raises(EnvironmentProblem, match="/nowhere does not exist in the image"):
        engine.copy_out(built.result.tags[0], "/nowhere", tmp_path / "none")


def test_rebuild_after_changing_one_file_reuses_the_steps_before_it(
    built: Built, made_images: list[str]
) -> None:
    (built.context / "input.txt").write_text("two\n")
    tag = f"fdl-engine-test/app:{RUN_ID}-2"
    made_images.append(tag)
    spec = BuildSpec(
        built.context,
        dockerfile_text=DOCKERFILE,
        tags=(tag,),
        build_args=dict(built.spec.build_args),
        labels=dict(built.spec.labels),
        secrets=dict(built.spec.secrets),
    )
    try:
        result = built.engine.build(spec)
    finally:
        (built.context / "input.txt").write_text("one\n")

    assert result.cached_steps and result.built_steps, result.steps
    assert any("/cache/first" in s for s in result.cached_steps)
    assert "COPY input.txt /app/input.txt" in result.built_steps
    assert any("/cache/again" in s for s in result.built_steps)
    assert any("secrets/token" in s for s in result.built_steps)
    # the cache mount kept its content across builds, and stayed out of the image
    again = built.engine.run(RunSpec(tag, ("cat", "/app/again-runs", "/app/input.txt")))
    assert again.stdout.split() == ["2", "two"]


def test_a_classic_only_client_gives_the_buildkit_error(
    tmp_path: Path, base_image: str, made_images: list[str]
) -> None:
    real = shutil.which("docker")
    assert real is not None
    v28 = make_fake_docker(tmp_path / "v28", version="28.2.2", buildx=False, forward_to=real)
    engine = DockerEngine(SubprocessRunner(), {**os.environ, "FDL_DOCKER": str(v28.path)})
    context = tmp_path / "ctx"
    context.mkdir()

    with pytest.raises(EnvironmentProblem) as caught:
        engine.build(
            BuildSpec(context, dockerfile_text=DOCKERFILE, build_args={"BASE": base_image})
        )
    assert (
        "needs BuildKit (RUN --mount=type=cache, RUN --mount=type=secret)" in caught.value.message
    )
    assert "buildx" in (caught.value.hint or "")

    tag = f"fdl-engine-test/classic:{RUN_ID}"
    made_images.append(tag)
    plain = f"FROM {base_image}\nRUN echo classic > /c\nLABEL org.fdl.test.run={RUN_ID}\n"
    first = engine.build(BuildSpec(context, dockerfile_text=plain, tags=(tag,)))
    second = engine.build(BuildSpec(context, dockerfile_text=plain, tags=(tag,)))
    assert first.builder is Builder.CLASSIC
    assert first.image_id == second.image_id
    assert second.cached_steps == ["RUN echo classic > /c", f"LABEL org.fdl.test.run={RUN_ID}"]
    assert engine.inspect_image(tag).labels == {"org.fdl.test.run": RUN_ID}


def test_compose_builds_with_buildkit_and_runs_one_off_containers(
    engine: DockerEngine, tmp_path: Path, base_image: str, made_images: list[str]
) -> None:
    compose = engine.compose()
    tag = f"fdl-engine-test/compose:{RUN_ID}"
    made_images.append(tag)
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image}\nRUN --mount=type=cache,target=/c echo built > /built\n"
    )
    (tmp_path / "docker-compose.yml").write_text(
        f'version: "3.8"\nservices:\n  dev:\n    build: .\n    image: {tag}\n'
        "    volumes: ['.:/workspace']\n    working_dir: /workspace\n"
    )
    runner = SubprocessRunner()
    env = {**os.environ, **compose.env}
    project = ["--project-name", f"fdltest{RUN_ID}"]
    try:
        done = runner.run(
            [
                *compose.argv,
                *project,
                "run",
                "--rm",
                "-T",
                "dev",
                "sh",
                "-c",
                "cat /built; ls; exit 5",
            ],
            cwd=tmp_path,
            env=env,
            check=False,
            input="",
        )
    finally:
        runner.run([*compose.argv, *project, "down"], cwd=tmp_path, env=env, check=False)
    assert done.returncode == 5, done.stderr
    assert done.stdout.split() == ["built", "Dockerfile", "docker-compose.yml"]
