"""Finding docker compose: the v2 plugin, a standalone docker-compose, or a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.engine import find_compose, select_client
from fdl.errors import EnvironmentProblem
from fdl.runner import SubprocessRunner
from tests.support.fake_docker import make_fake_docker

RUNNER = SubprocessRunner()


def environ(*folders: Path) -> dict[str, str]:
    return {"PATH": os.pathsep.join(str(f) for f in folders)}


def fake_compose_v1(folder: Path, version: str = "1.29.2") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "docker-compose"
    path.write_text(f'#!/bin/sh\n[ "$1" = version ] && echo "{version}" && exit 0\nexit 1\n')
    path.chmod(0o755)
    return path


def test_plugin_is_used_when_docker_compose_version_works(tmp_path: Path) -> None:
    docker = make_fake_docker(tmp_path / "bin", version="28.2.2", buildx=True, compose=True)
    fake_compose_v1(tmp_path / "bin")
    env = environ(docker.folder)

    compose = find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    assert compose.argv == (str(docker.path), "compose")
    assert compose.flavour == "plugin"
    assert compose.version == "2.24.6"
    assert compose.env == {}


def test_plugin_of_another_client_is_found(tmp_path: Path) -> None:
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2", compose=True)
    env = environ(v28.folder, v20.folder)

    compose = find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    assert compose.argv == (str(v28.path), "compose")
    assert f"`{v20.path} compose version` failed (no compose plugin)" in compose.notes


def test_compose_v1_gets_the_chosen_client_first_on_path(tmp_path: Path) -> None:
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2")
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    v1 = fake_compose_v1(tmp_path / "compose")
    env = environ(v28.folder, v20.folder, v1.parent)

    compose = find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    assert compose.argv == (str(v1),)
    assert compose.flavour == "standalone"
    assert compose.version == "1.29.2"
    assert compose.env["COMPOSE_DOCKER_CLI_BUILD"] == "1"
    assert compose.env["DOCKER_BUILDKIT"] == "1"
    first = Path(compose.env["PATH"].split(os.pathsep)[0])
    assert os.path.realpath(first / "docker") == os.path.realpath(v20.path)
    assert compose.env["PATH"].endswith(env["PATH"])


def test_compose_v1_leaves_path_alone_when_the_chosen_client_is_first(tmp_path: Path) -> None:
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    v1 = fake_compose_v1(tmp_path / "compose")
    env = environ(v20.folder, v1.parent)

    compose = find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    assert compose.argv == (str(v1),) and compose.env["DOCKER_BUILDKIT"] == "1"
    assert "PATH" not in compose.env


def test_compose_v1_with_a_classic_only_client_builds_classic(tmp_path: Path) -> None:
    v28 = make_fake_docker(tmp_path / "local", version="28.2.2")
    v1 = fake_compose_v1(tmp_path / "compose")
    env = environ(v28.folder, v1.parent)

    compose = find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    assert compose.env["DOCKER_BUILDKIT"] == "0"


def test_standalone_compose_v2_needs_no_environment(tmp_path: Path) -> None:
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    v2 = fake_compose_v1(tmp_path / "compose", version="2.24.6")
    env = environ(v20.folder, v2.parent)

    compose = find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    assert compose.argv == (str(v2),)
    assert compose.env == {}


def test_no_compose_names_both_ways(tmp_path: Path) -> None:
    v20 = make_fake_docker(tmp_path / "debian", version="20.10.24")
    env = environ(v20.folder)

    with pytest.raises(EnvironmentProblem) as caught:
        find_compose(select_client(RUNNER, env), RUNNER, env, tmp_path / "shim")

    error = caught.value
    assert "neither `docker compose` (the v2 plugin) nor `docker-compose` works" in error.message
    assert "docker-compose-plugin" in (error.hint or "")
    assert "no `docker-compose` on PATH" in (error.details or "")
