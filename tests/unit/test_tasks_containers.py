"""Compose program selection, container detection and compose file mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import EnvironmentProblem, ManifestError
from fdl.tasks._compose_file import container_path, find_compose_file, interpolate, load_compose
from fdl.tasks._docker import compose_program, in_container
from tests.support.fakes import FakeEngine, FakeRunner
from tests.support.tasks_helpers import write


def test_compose_comes_from_the_engine_with_its_environment() -> None:
    from fdl.engine import ComposeCommand

    engine = FakeEngine(
        compose_command=ComposeCommand(
            ("/usr/bin/docker-compose",),
            "1.29.2",
            "standalone",
            {"COMPOSE_DOCKER_CLI_BUILD": "1", "DOCKER_BUILDKIT": "1", "PATH": "/shim:/usr/bin"},
        )
    )
    program = compose_program(FakeRunner(), {}, engine=engine)
    assert program.argv == ["/usr/bin/docker-compose"]
    assert [(c.name, c.value, c.prepend) for c in program.env] == [
        ("COMPOSE_DOCKER_CLI_BUILD", "1", False),
        ("DOCKER_BUILDKIT", "1", False),
        ("PATH", "/shim", True),
    ]


def test_no_docker_at_all_is_an_environment_problem() -> None:
    with pytest.raises(EnvironmentProblem):
        compose_program(FakeRunner(programs={}), {"PATH": "/nonexistent"})


def test_fdl_compose_overrides_the_choice() -> None:
    program = compose_program(FakeRunner(), {"FDL_COMPOSE": "podman compose"})
    assert (program.argv, program.env) == (["podman", "compose"], [])


@pytest.mark.parametrize("value", ["podman 'compose", 'docker "compose', "docker \\"])
def test_fdl_compose_with_an_unbalanced_quote_is_an_environment_problem(value: str) -> None:
    with pytest.raises(EnvironmentProblem, match="FDL_COMPOSE=") as caught:
        compose_program(FakeRunner(), {"FDL_COMPOSE": value})
    assert caught.value.hint is not None
    assert "podman compose" in caught.value.hint


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
