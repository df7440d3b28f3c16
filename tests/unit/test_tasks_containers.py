"""Compose program selection, container detection and compose file mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import EnvironmentProblem, ManifestError
from fdl.runner import Completed, FakeRunner
from fdl.tasks._compose_file import container_path, find_compose_file, interpolate, load_compose
from fdl.tasks._docker import compose_argv, in_container
from tests.support.tasks_helpers import write


def test_compose_v2_plugin_is_preferred() -> None:
    runner = FakeRunner(
        {("docker", "compose", "version"): Completed([], 0, "Docker Compose version v2.29")},
        programs={"docker": "/usr/bin/docker", "docker-compose": "/usr/bin/docker-compose"},
    )
    assert compose_argv(runner, {}) == ["docker", "compose"]


def test_compose_v1_when_the_plugin_is_missing() -> None:
    runner = FakeRunner(
        {("docker", "compose", "version"): Completed([], 1, "", "unknown command")},
        programs={"docker": "/usr/bin/docker", "docker-compose": "/usr/bin/docker-compose"},
    )
    assert compose_argv(runner, {}) == ["docker-compose"]


def test_no_compose_at_all_names_both() -> None:
    runner = FakeRunner(programs={})
    with pytest.raises(EnvironmentProblem) as caught:
        compose_argv(runner, {})
    assert "`docker compose`" in caught.value.message
    assert "`docker-compose`" in caught.value.message


def test_fdl_compose_overrides_the_choice() -> None:
    assert compose_argv(FakeRunner(), {"FDL_COMPOSE": "podman compose"}) == ["podman", "compose"]


def test_container_detection(tmp_path: Path) -> None:
    marker = tmp_path / ".dockerenv"
    assert not in_container({}, (str(marker),))
    marker.touch()
    assert in_container({}, (str(marker),))
    assert not in_container({"FDL_IN_CONTAINER": "0"}, (str(marker),))
    assert in_container({"FDL_IN_CONTAINER": "1"}, ())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A}", "a"),
        ("$A/x", "a/x"),
        ("${MISSING:-./d}", "./d"),
        ("${EMPTY:-./d}", "./d"),
        ("${EMPTY-./d}", ""),
        ("${A:-./d}", "a"),
        ("${A:+set}", "set"),
        ("$$A", "$A"),
        ("${MISSING}", ""),
    ],
)
def test_interpolation(text: str, expected: str) -> None:
    assert interpolate(text, {"A": "a", "EMPTY": ""}) == expected


def test_short_and_long_bind_mounts(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "docker-compose.yml": """\
            services:
              dev:
                image: x
                volumes:
                  - .:/workspace
                  - ./data:/data:ro
                  - cache:/root/.cache
                  - ${LIBTORCH_HOST_PATH:-./libtorch/precompiled/cpu}:/usr/local/libtorch:ro
              cuda:
                volumes:
                  - type: bind
                    source: .
                    target: /srv/proj/
                  - type: volume
                    source: cache
                    target: /cache
              bare:
                image: y
            volumes:
              cache:
            """
        },
    )
    project = load_compose(tmp_path / "docker-compose.yml", {})
    assert project.services == ["dev", "cuda", "bare"]
    dev = [(m.source, m.target) for m in project.mounts["dev"]]
    assert dev == [
        (tmp_path, "/workspace"),
        (tmp_path / "data", "/data"),
        (tmp_path / "libtorch" / "precompiled" / "cpu", "/usr/local/libtorch"),
    ]
    assert [(m.source, m.target) for m in project.mounts["cuda"]] == [(tmp_path, "/srv/proj")]
    assert project.mounts["bare"] == []
    with_var = load_compose(tmp_path / "docker-compose.yml", {"LIBTORCH_HOST_PATH": "/opt/lt"})
    assert with_var.mounts["dev"][2].source == Path("/opt/lt")


def test_override_file_adds_mounts(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "compose.yaml": "services:\n  dev:\n    image: x\n",
            "compose.override.yaml": "services:\n  dev:\n    volumes: ['.:/w']\n",
        },
    )
    project = load_compose(tmp_path / "compose.yaml", {})
    assert [(m.source, m.target) for m in project.mounts["dev"]] == [(tmp_path, "/w")]


def test_container_path_uses_the_most_specific_mount(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"compose.yaml": "services:\n  dev:\n    volumes: ['.:/ws', './sub:/special']\n"},
    )
    mounts = load_compose(tmp_path / "compose.yaml", {}).mounts["dev"]
    assert container_path(mounts, tmp_path) == "/ws"
    assert container_path(mounts, tmp_path / "a" / "b") == "/ws/a/b"
    assert container_path(mounts, tmp_path / "sub" / "x") == "/special/x"
    assert container_path(mounts, tmp_path.parent) is None


def test_compose_file_found_walking_up_and_ambiguity_refused(tmp_path: Path) -> None:
    write(tmp_path, {"docker-compose.yml": "services: {}\n", "a/b/.keep": ""})
    assert find_compose_file(tmp_path / "a" / "b") == tmp_path / "docker-compose.yml"
    write(tmp_path, {"compose.yaml": "services: {}\n"})
    with pytest.raises(ManifestError, match=r"found both compose\.yaml and docker-compose\.yml"):
        find_compose_file(tmp_path / "a")


def test_broken_compose_file_is_a_manifest_error(tmp_path: Path) -> None:
    write(tmp_path, {"compose.yaml": "services: [\n"})
    with pytest.raises(ManifestError, match="cannot read the compose file"):
        load_compose(tmp_path / "compose.yaml", {})
