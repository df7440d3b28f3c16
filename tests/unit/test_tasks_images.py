"""Commands in a compose service backed by an image profile: the image is built when
missing, dev containers run as the host user, and a baked libtorch is no cause for a note."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.manifest import load_manifest
from fdl.tasks import ensure_service_image, prepare, render_script
from fdl.tasks._plan import CommandPlan
from tests.support.fakes import FakeEngine, FakeRunner
from tests.support.images import make_variant
from tests.support.tasks_helpers import write

HOST = {"FDL_IN_CONTAINER": "0", "FDL_COMPOSE": "docker-compose"}

FILES = {
    "fdl.yml": """\
        commands:
          build: {run: make, docker: dev}
          plain: {run: make, docker: other}
        images:
          dev: {}
          train: {}
        """,
    "docker-compose.yml": """\
        services:
          dev:
            image: "${DEV_IMAGE:-proj-dev:latest}"
            user: "${FDL_UID:-1000}:${FDL_GID:-1000}"
            volumes: [".:/workspace", "${LIBTORCH_HOST_PATH:-./libtorch/precompiled/cpu}:/opt/libtorch:ro"]
          other:
            image: something-else
            volumes: [".:/workspace"]
        """,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = write(tmp_path / "proj", FILES)
    make_variant(root)
    return root


def plan_of(root: Path, name: str, environ: dict[str, str] | None = None) -> CommandPlan:
    manifest = load_manifest(root, environ={})
    plan = prepare(manifest, name, [], environ={**HOST, **(environ or {})}, runner=FakeRunner())
    assert plan.plan is not None
    return plan.plan


def test_a_service_named_like_a_profile_is_that_profiles_image(project: Path) -> None:
    plan = plan_of(project, "build")
    assert plan.docker is not None
    assert (plan.docker.profile, plan.docker.image) == ("dev", "proj-dev:latest")
    assert "# its image is built first when missing (fdl image build dev)" in render_script(plan)
    other = plan_of(project, "plain")
    assert other.docker is not None and other.docker.profile is None
    assert "built first" not in render_script(other)


def test_dev_containers_run_as_the_host_user(project: Path) -> None:
    host = plan_of(project, "build").environ({})
    assert (host["FDL_UID"], host["FDL_GID"]) == (str(os.getuid()), str(os.getgid()))
    # A value the user set is theirs: fdl neither overrides nor repeats it.
    mine = plan_of(project, "build", {"FDL_UID": "4242"})
    assert "FDL_UID" not in {change.name for change in mine.env}
    assert mine.environ({"FDL_UID": "4242"})["FDL_UID"] == "4242"


def test_a_missing_image_is_built_and_an_existing_one_used(project: Path) -> None:
    manifest = load_manifest(project, environ={})
    wrap = plan_of(project, "build").docker
    assert wrap is not None
    engine = FakeEngine()
    statuses: list[str] = []
    assert ensure_service_image(manifest, wrap, engine=engine, on_status=statuses.append) == (
        "proj-dev:latest"
    )
    assert [spec.tags for spec in engine.builds] == [("proj-dev:latest",)]
    assert "image proj-dev:latest of service 'dev' is missing" in statuses[0]
    assert (project / ".dockerignore").is_file()  # built like `fdl image build`
    assert ensure_service_image(manifest, wrap, engine=engine) is None
    assert len(engine.builds) == 1


def test_a_service_using_another_image_is_left_alone(project: Path) -> None:
    manifest = load_manifest(project, environ={})
    wrap = plan_of(project, "build", {"DEV_IMAGE": "mine:1"}).docker
    assert wrap is not None and wrap.image == "mine:1"
    engine = FakeEngine()
    assert ensure_service_image(manifest, wrap, engine=engine) is None
    assert engine.builds == []


def test_a_baked_dev_image_needs_no_mount_and_gets_no_note(project: Path) -> None:
    compose = "services:\n  baked: {image: proj-baked:latest}\n"
    write(
        project,
        {
            "docker-compose.yml": compose,
            "fdl.yml": "commands:\n  b: {run: make, docker: baked}\n"
            "images:\n  baked: {kind: dev, libtorch: baked}\n",
        },
    )
    plan = plan_of(project, "b")
    assert not any("not mounted" in note for note in plan.notes)
    write(project, {"fdl.yml": "commands:\n  b: {run: make, docker: baked}\n"})
    assert any("not mounted into service 'baked'" in note for note in plan_of(project, "b").notes)


def test_a_baked_image_uses_its_own_libtorch_not_the_one_under_the_project(
    project: Path,
) -> None:
    """The project mount shows libtorch/ too; in a baked dev image fdl must not point
    the build at it (the image's ENV names the baked one)."""
    write(project, {"fdl.yml": FILES["fdl.yml"].replace("dev: {}", "dev: {libtorch: baked}")})
    compose = FILES["docker-compose.yml"].replace(
        ', "${LIBTORCH_HOST_PATH:-./libtorch/precompiled/cpu}:/opt/libtorch:ro"', ""
    )
    write(project, {"docker-compose.yml": compose})
    plan = plan_of(project, "build")
    assert plan.docker is not None
    names = {change.name for change in (*plan.docker.env, *plan.docker.prepend)}
    assert not names & {"LIBTORCH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH"}
    write(project, {"fdl.yml": FILES["fdl.yml"]})  # mounted: seen through the project mount
    env = {c.name: c.value for c in plan_of(project, "build").docker.env}  # type: ignore[union-attr]
    assert env["LIBTORCH"] == "/workspace/libtorch/precompiled/cpu"
