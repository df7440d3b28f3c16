"""The docker command lines for builds and runs, checked as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.engine import (
    Builder,
    BuildSpec,
    DockerClient,
    Mount,
    RunSpec,
    Secret,
    build_command,
    buildkit_reasons,
    run_command,
)
from fdl.errors import EnvironmentProblem

BUILDX = DockerClient("/d/docker", "28.2.2", Builder.BUILDX, "v0.12.1", "28.2.2")
BUILDKIT = DockerClient("/d/docker", "20.10.24", Builder.BUILDKIT, None, "20.10.24")
CLASSIC = DockerClient("/d/docker", "28.2.2", Builder.CLASSIC, None, "20.10.24")
CTX = Path("/src/ctx")
DF = Path("/tmp/x/Dockerfile")
IID = Path("/tmp/x/iid")


def test_full_build_with_buildx() -> None:
    spec = BuildSpec(
        CTX,
        tags=("me/app:1", "me/app:latest"),
        build_args={"TORCH_CUDA_ARCH_LIST": "6.1;12.0", "MAX_JOBS": "2"},
        labels={"org.fdl.archs": "sm_61 sm_120", "org.fdl.manifest": "{}"},
        target="runtime",
        secrets={"pip": Secret(env="PIP_TOKEN"), "netrc": Secret(file=Path("/home/u/.netrc"))},
        cache_from=("type=registry,ref=reg/app:cache",),
        cache_to=("type=registry,ref=reg/app:cache,mode=max",),
        no_cache=True,
        pull=True,
        platform="linux/amd64",
        network="host",
    )

    argv, env = build_command(BUILDX, spec, DF, IID)

    assert env == {}
    assert argv == [
        "/d/docker", "buildx", "build", "--load", "--progress=plain",
        "--file", "/tmp/x/Dockerfile", "--iidfile", "/tmp/x/iid",
        "--tag", "me/app:1", "--tag", "me/app:latest",
        "--build-arg", "MAX_JOBS=2", "--build-arg", "TORCH_CUDA_ARCH_LIST=6.1;12.0",
        "--label", "org.fdl.archs=sm_61 sm_120", "--label", "org.fdl.manifest={}",
        "--target", "runtime",
        "--secret", "id=netrc,src=/home/u/.netrc", "--secret", "id=pip,env=PIP_TOKEN",
        "--cache-from", "type=registry,ref=reg/app:cache",
        "--cache-to", "type=registry,ref=reg/app:cache,mode=max",
        "--no-cache", "--pull", "--platform", "linux/amd64", "--network", "host",
        "/src/ctx",
    ]  # fmt: skip


def test_builtin_buildkit_build_sets_docker_buildkit_and_keeps_local_images() -> None:
    spec = BuildSpec(CTX, tags=("a:1",), secrets={"s": Secret(file=Path("/s"))})

    argv, env = build_command(BUILDKIT, spec, DF, IID)

    assert env == {"DOCKER_BUILDKIT": "1"}
    assert argv == [
        "/d/docker", "build", "--progress=plain", "--file", "/tmp/x/Dockerfile",
        "--iidfile", "/tmp/x/iid", "--tag", "a:1", "--secret", "id=s,src=/s", "/src/ctx",
    ]  # fmt: skip
    assert "--pull" not in argv


def test_classic_build_has_no_progress_flag_and_turns_buildkit_off() -> None:
    argv, env = build_command(CLASSIC, BuildSpec(CTX), DF, IID)

    assert env == {"DOCKER_BUILDKIT": "0"}
    assert argv == [
        "/d/docker",
        "build",
        "--file",
        "/tmp/x/Dockerfile",
        "--iidfile",
        "/tmp/x/iid",
        "/src/ctx",
    ]


def test_inline_cache_export_without_buildx_becomes_the_build_arg() -> None:
    spec = BuildSpec(CTX, cache_to=("type=inline",), cache_from=("type=registry,ref=reg/a:c",))

    argv, _ = build_command(BUILDKIT, spec, DF, IID)

    assert argv[-5:] == [
        "--cache-from", "reg/a:c", "--build-arg", "BUILDKIT_INLINE_CACHE=1", "/src/ctx"
    ]  # fmt: skip
    assert "--cache-to" not in argv


def test_other_cache_exports_need_buildx() -> None:
    spec = BuildSpec(CTX, cache_to=("type=local,dest=/tmp/cache",))

    with pytest.raises(EnvironmentProblem) as caught:
        build_command(BUILDKIT, spec, DF, IID)

    assert "cache export 'type=local,dest=/tmp/cache' needs docker buildx" in caught.value.message
    assert "type=inline" in (caught.value.hint or "")


def test_local_cache_source_needs_buildx() -> None:
    spec = BuildSpec(CTX, cache_from=("type=local,src=/tmp/cache",))
    with pytest.raises(EnvironmentProblem):
        build_command(CLASSIC, spec, DF, IID)


@pytest.mark.parametrize(
    ("dockerfile", "reasons"),
    [
        ("FROM a\nRUN make\nCOPY . /src\n", []),
        (
            "FROM a\nRUN --mount=type=cache,target=/root/.cache pip install x\n",
            ["RUN --mount=type=cache"],
        ),
        (
            "FROM a\nRUN --mount=type=secret,id=pip cat /run/secrets/pip\n",
            ["RUN --mount=type=secret"],
        ),
        ("FROM a\nRUN --mount=id=pip,type=secret true\n", ["RUN --mount=type=secret"]),
        ("FROM a\nRUN --mount=type=bind,from=b,target=/b ls /b\n", ["RUN --mount"]),
        ("FROM a\nCOPY --link --from=b /x /x\n", ["COPY --link"]),
        ("# syntax=docker/dockerfile:1\nFROM a\n", ["a # syntax= directive"]),
        ("FROM a\nRUN <<EOF\necho hi\nEOF\n", ["a here-document"]),
        ("FROM a\n# RUN with --mount is mentioned in a comment only\n", []),
    ],
)
def test_buildkit_only_syntax_is_recognised(dockerfile: str, reasons: list[str]) -> None:
    assert buildkit_reasons(BuildSpec(CTX), dockerfile) == reasons


def test_secrets_and_cache_exports_need_buildkit_too() -> None:
    spec = BuildSpec(CTX, secrets={"s": Secret(env="S")}, cache_to=("type=inline",))
    assert buildkit_reasons(spec, "FROM a\n") == ["build secrets", "cache export (cache_to)"]


def test_a_secret_takes_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Secret()
    with pytest.raises(ValueError, match="exactly one"):
        Secret(file=Path("/a"), env="A")


def test_plain_run_has_no_gpus_and_removes_the_container() -> None:
    argv = run_command(BUILDKIT, RunSpec("img:1", ("python3", "-c", "print(1)")))
    assert argv == ["/d/docker", "run", "--rm", "img:1", "python3", "-c", "print(1)"]


def test_full_run() -> None:
    spec = RunSpec(
        "img:1",
        ("bash", "-lc", "make test"),
        mounts=(
            Mount("/home/u/proj", "/workspace"),
            Mount("/opt/libtorch,v2", "/usr/local/libtorch", read_only=True),
            Mount("", "/tmp", type="tmpfs"),
        ),
        env={"HF_TOKEN": None, "FDL_VERBOSITY": "2"},
        user="1000:1000",
        workdir="/workspace",
        gpus="all",
        interactive=True,
        tty=True,
        network="none",
        name="fdl-run-1",
        shm_size="8g",
        extra_args=("--ipc=host",),
    )

    assert run_command(BUILDKIT, spec) == [
        "/d/docker", "run", "--rm", "--interactive", "--tty",
        "--name", "fdl-run-1", "--network", "none", "--user", "1000:1000",
        "--workdir", "/workspace", "--gpus", "all", "--shm-size", "8g",
        "--env", "FDL_VERBOSITY=2", "--env", "HF_TOKEN",
        "--mount", "type=bind,source=/home/u/proj,target=/workspace",
        "--mount", 'type=bind,"source=/opt/libtorch,v2",target=/usr/local/libtorch,readonly',
        "--mount", "type=tmpfs,target=/tmp",
        "--ipc=host", "img:1", "bash", "-lc", "make test",
    ]  # fmt: skip


def test_kept_container_has_no_rm() -> None:
    argv = run_command(BUILDKIT, RunSpec("img", remove=False))
    assert argv[:2] == ["/d/docker", "run"] and argv[-1] == "img", argv
    assert "--rm" in run_command(BUILDKIT, RunSpec("img"))
    assert "--rm" not in argv
