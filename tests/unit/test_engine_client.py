"""Choosing the docker client among several on PATH (fake clients as shell scripts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.engine import Builder, BuildSpec, DockerEngine, probe_clients, select_client
from fdl.errors import EnvironmentProblem
from fdl.runner import SubprocessRunner
from tests.support.fake_docker import make_fake_docker


def environ(*folders: Path, **extra: str) -> dict[str, str]:
    """An environment whose PATH holds only the given folders (plus /bin for sh)."""
    env = {"PATH": os.pathsep.join([*(str(f) for f in folders), "/nonexistent"])}
    env.update(extra)
    return env


RUNNER = SubprocessRunner()


def test_v20_client_with_builtin_buildkit_beats_v28_without_buildx(tmp_path: Path) -> None:
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2")
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24+dfsg1")

    selection = select_client(RUNNER, environ(v28.folder, v20.folder))

    assert selection.client.path == str(v20.path)
    assert selection.client.builder is Builder.BUILDKIT
    assert [c.builder for c in selection.tried] == [Builder.CLASSIC, Builder.BUILDKIT]
    assert f"preferred over {v28.path} (classic)" in selection.reason
    explained = "\n".join(selection.explain())
    assert "no buildx plugin" in explained
    assert "BuildKit built into the client" in explained


def test_a_client_with_buildx_is_preferred_to_builtin_buildkit(tmp_path: Path) -> None:
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    modern = make_fake_docker(tmp_path / "modern", version="28.2.2", buildx=True)

    selection = select_client(RUNNER, environ(v20.folder, modern.folder))

    assert selection.client.path == str(modern.path)
    assert selection.client.builder is Builder.BUILDX
    assert selection.client.buildx == "github.com/docker/buildx v0.12.1 fake"


def test_equal_clients_keep_path_order(tmp_path: Path) -> None:
    first = make_fake_docker(tmp_path / "a", version="20.10.5")
    make_fake_docker(tmp_path / "b", version="20.10.24")

    selection = select_client(RUNNER, environ(first.folder, tmp_path / "b"))

    assert selection.client.path == str(first.path)
    assert "first on PATH" in selection.reason


def test_the_same_file_reached_twice_is_asked_once(tmp_path: Path) -> None:
    real = make_fake_docker(tmp_path / "usr" / "bin")
    (tmp_path / "bin").symlink_to(real.folder)  # /bin -> /usr/bin on merged-usr systems

    selection = select_client(RUNNER, environ(tmp_path / "bin", real.folder))

    assert len(selection.tried) == 1


def test_a_client_without_daemon_is_not_chosen_even_if_it_builds_better(tmp_path: Path) -> None:
    lost = make_fake_docker(tmp_path / "lost", buildx=True, daemon=False)
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")

    selection = select_client(RUNNER, environ(lost.folder, v20.folder))

    assert selection.client.path == str(v20.path)
    assert "have no daemon" in selection.reason
    assert "Cannot connect to the Docker daemon" in (selection.tried[0].problem or "")


def test_no_daemon_names_every_client_tried(tmp_path: Path) -> None:
    a = make_fake_docker(tmp_path / "a", daemon=False)
    b = make_fake_docker(tmp_path / "b", version="20.10.24", daemon=False)

    with pytest.raises(EnvironmentProblem) as caught:
        select_client(RUNNER, environ(a.folder, b.folder))

    error = caught.value
    assert "no docker daemon answers" in error.message
    assert f"tried {a.path}: Cannot connect to the Docker daemon" in (error.details or "")
    assert f"tried {b.path}" in (error.details or "")
    assert "systemctl start docker" in (error.hint or "")


def test_no_docker_on_path(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        select_client(RUNNER, environ(tmp_path))
    assert "no `docker` on PATH" in caught.value.message
    assert probe_clients(RUNNER, environ(tmp_path)) is None


def test_fdl_docker_wins_alone(tmp_path: Path) -> None:
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    chosen = make_fake_docker(tmp_path / "chosen", version="28.2.2")

    selection = select_client(RUNNER, environ(v20.folder, FDL_DOCKER=str(chosen.path)))

    assert [c.path for c in selection.tried] == [str(chosen.path)]
    assert selection.client.builder is Builder.CLASSIC
    assert "set by FDL_DOCKER" in selection.reason
    assert v20.calls() == []


def test_fdl_docker_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        select_client(RUNNER, environ(tmp_path, FDL_DOCKER=str(tmp_path / "nope")))
    assert f"FDL_DOCKER={tmp_path / 'nope'} is not an executable" in caught.value.message


def test_version_from_docker_dash_dash_version_when_json_is_unreadable(tmp_path: Path) -> None:
    old = make_fake_docker(tmp_path / "old", version="19.03.15", json_version=False)

    client = probe_clients(RUNNER, environ(old.folder))

    assert client is not None
    assert client.client.version == "19.03.15"
    assert client.client.builder is Builder.BUILDKIT


def test_classic_only_client_refuses_a_cache_mount_build_with_a_fix(tmp_path: Path) -> None:
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2")
    context = tmp_path / "ctx"
    context.mkdir()
    engine = DockerEngine(RUNNER, environ(v28.folder))
    spec = BuildSpec(
        context,
        dockerfile_text="FROM base\nRUN --mount=type=cache,target=/root/.cache pip install x\n",
    )

    with pytest.raises(EnvironmentProblem) as caught:
        engine.build(spec)

    error = caught.value
    assert error.message == (
        "this build needs BuildKit (RUN --mount=type=cache), but no docker client here can "
        "build with it"
    )
    assert "buildx plugin" in (error.hint or "")
    assert "FDL_DOCKER to a docker client older than 23.0" in (error.hint or "")
    assert f"tried {v28.path} (client 28.2.2): classic builder only" in (error.details or "")
    assert v28.calls_of("build") == []


def test_classic_only_client_still_builds_plain_dockerfiles(tmp_path: Path) -> None:
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2")
    context = tmp_path / "ctx"
    context.mkdir()
    engine = DockerEngine(RUNNER, environ(v28.folder))

    result = engine.build(
        BuildSpec(context, dockerfile_text="FROM base\nRUN true\n", tags=("a:1",))
    )

    assert result.image_id == "sha256:fake"
    assert result.builder is Builder.CLASSIC
    (call,) = v28.calls_of("build")
    assert "--progress=plain" not in call
    build_env = v28.buildkit_env()[v28.calls().index(call)]
    assert build_env == "0"  # a user's DOCKER_BUILDKIT=1 would fail on this client


def test_builds_run_the_chosen_client_the_chosen_way(tmp_path: Path) -> None:
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2")
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    context = tmp_path / "ctx"
    context.mkdir()
    engine = DockerEngine(RUNNER, environ(v28.folder, v20.folder))

    engine.build(BuildSpec(context, dockerfile_text="FROM b\nRUN --mount=type=cache,target=/c x\n"))

    assert v28.calls_of("build") == []
    (call,) = v20.calls_of("build")
    assert call[:2] == ["build", "--progress=plain"]
    assert v20.buildkit_env()[v20.calls().index(call)] == "1"


def test_buildx_client_builds_with_buildx_and_loads_the_image(tmp_path: Path) -> None:
    modern = make_fake_docker(tmp_path / "modern", version="27.0.1", buildx=True)
    context = tmp_path / "ctx"
    context.mkdir()
    engine = DockerEngine(RUNNER, environ(modern.folder))

    engine.build(BuildSpec(context, dockerfile_text="FROM b\n", tags=("x:1",)))

    (call,) = modern.calls_of("buildx build")
    assert call[:4] == ["buildx", "build", "--load", "--progress=plain"]
    assert call[-1] == str(context)
