"""Executors against the FakeEngine: builds (variant image, secrets, BuildKit),
size reports (layers, floor) and run plans (user, GPUs, mounts)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fdl.engine import Builder, Layer, Secret
from fdl.errors import EnvironmentProblem, UsageError
from fdl.images import ImageSpec, plan_images, render_dockerfile
from fdl.images._build import build_images
from fdl.images._run import plan_run, prepare_mounts
from fdl.images._size import parse_listing, size_report
from fdl.manifest import load_manifest
from tests.support.fakes import FakeEngine
from tests.support.images import make_project, make_variant

MANIFEST = """\
images:
  dev: {}
  train:
    secrets: {pip_token: {env: PIP_TOKEN}}
    pass-env: [WANDB_API_KEY]
    mounts: ["./data:/workspace/data:ro", "./runs:/workspace/runs"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, MANIFEST)
    make_variant(project)
    (project / "libtorch/precompiled/cpu/lib/libc10.so").write_bytes(b"\x7fELF")
    return project


def specs_of(project: Path, *names: str) -> list[ImageSpec]:
    return plan_images(load_manifest(project), list(names))


def test_train_build_makes_the_variant_image_once(project: Path) -> None:
    engine = FakeEngine()
    (train,) = specs_of(project, "train")
    environ = {"PIP_TOKEN": "s3cret"}
    statuses: list[str] = []

    (built,) = build_images(
        [train], project, engine=engine, environ=environ, on_status=statuses.append
    )

    variant_build, main = engine.builds
    assert variant_build.context == project / "libtorch/precompiled/cpu"
    assert variant_build.tags == (built.libtorch_image,)
    assert built.libtorch_image is not None
    assert built.libtorch_image.startswith("fdl-libtorch:precompiled-cpu-")
    # the project's own stable name points at it; no name other projects use is touched
    assert engine.image_exists(f"fdl-libtorch:{project.name}-precompiled-cpu")
    assert not engine.image_exists("fdl-libtorch:precompiled-cpu")
    assert main.context == project
    assert main.dockerfile_text == render_dockerfile(train)
    assert main.build_args == {"LIBTORCH_IMAGE": built.libtorch_image}
    assert main.secrets == {"pip_token": Secret(env="PIP_TOKEN")}
    assert "s3cret" not in repr(main)  # the value stays in the environment
    assert any("making the libtorch image" in line for line in statuses)

    build_images([train], project, engine=engine, environ=environ)
    assert len(engine.builds) == 3  # the variant image was up to date

    (project / "libtorch/precompiled/cpu/lib/libextra.so").write_bytes(b"new")
    build_images([train], project, engine=engine, environ=environ)
    assert len(engine.builds) == 5  # a changed variant makes a new image
    assert engine.builds[3].tags != variant_build.tags


def test_mounted_dev_needs_no_variant_image(project: Path) -> None:
    engine = FakeEngine()
    (dev,) = specs_of(project, "dev")
    (built,) = build_images([dev], project, engine=engine, push=True)
    assert [b.tags for b in engine.builds] == [(dev.tag,)]
    assert built.libtorch_image is None
    assert engine.pushed == [dev.tag]


def test_missing_build_secret_fails_before_building(project: Path) -> None:
    engine = FakeEngine()
    (train,) = specs_of(project, "train")
    with pytest.raises(UsageError) as caught:
        build_images([train], project, engine=engine, environ={})
    assert "images.train.secrets.pip_token" in caught.value.message
    assert "$PIP_TOKEN" in caught.value.message
    assert engine.builds == []
    with_file = replace(train, secrets=(replace(train.secrets[0], env=None, file="missing"),))
    with pytest.raises(UsageError, match="does not exist"):
        build_images([with_file], project, engine=engine, environ={})


def test_classic_builder_is_refused_with_a_clear_error(project: Path) -> None:
    engine = FakeEngine(builder=Builder.CLASSIC)
    (dev,) = specs_of(project, "dev")
    with pytest.raises(EnvironmentProblem) as caught:
        build_images([dev], project, engine=engine)
    assert "needs BuildKit" in caught.value.message
    assert "RUN --mount=type=cache" in caught.value.message


def test_unreachable_registry_names_the_base_keys(project: Path) -> None:
    from fdl.errors import NetworkError

    failure = NetworkError("building x failed: docker could not reach a registry", hint="check")
    engine = FakeEngine(build_error=failure)
    (dev,) = specs_of(project, "dev")
    with pytest.raises(NetworkError) as caught:
        build_images([dev], project, engine=engine)
    hint = caught.value.hint or ""
    assert hint.startswith("check; ")
    assert dev.base in hint and "images.dev.base" in hint


def test_size_report_against_base_and_floor(project: Path) -> None:
    (train,) = specs_of(project, "train")
    engine = FakeEngine()
    base_layers = (Layer("ADD rootfs", 100), Layer("CMD bash", 0))
    engine.add_image(train.base, size=100, layers=base_layers)
    engine.add_image(
        train.tag,
        size=100 + 10 + 1000 + 50,
        layers=(
            *base_layers,
            Layer("RUN useradd", 10),
            Layer("COPY libs", 1000),
            Layer("COPY app", 50),
        ),
    )
    listing = "990\t/opt/libtorch/lib/libtorch_cpu.so\n45\t/opt/app/bin/train\n"
    engine.files[(train.tag, "/opt/app/fdl-closure.tsv")] = {"fdl-closure.tsv": listing}

    report = size_report(train, engine=engine)

    assert report.base_size == 100 and report.added == 1060
    assert report.floor == 100 + 990 + 45
    assert report.overhead == pytest.approx(1060 / 1035 - 1)
    assert [layer.in_base for layer in report.layers] == [True, True, False, False, False]
    data = report.to_json()
    assert (
        data["floor"] == 1135 and data["closure"][0]["path"] == "/opt/libtorch/lib/libtorch_cpu.so"
    )


def test_size_report_of_a_dev_image_has_no_floor(project: Path) -> None:
    (dev,) = specs_of(project, "dev")
    engine = FakeEngine()
    engine.add_image(dev.base, size=100)
    engine.add_image(dev.tag, size=600)
    report = size_report(dev, engine=engine)
    assert report.floor is None and report.overhead is None and report.added == 500


def test_parse_listing_skips_junk() -> None:
    assert parse_listing("12\t/a\nnot a line\n\n3\t/b c\n") == (("/a", 12), ("/b c", 3))


def test_run_as_the_caller_with_mounts_and_passed_env(project: Path) -> None:
    (train,) = specs_of(project, "train")
    (project / "data").mkdir()
    plan = plan_run(train, project, ["--steps", "3"], host_uid=1234, host_gid=99)
    run = plan.run
    assert run.image == train.tag and run.argv == ("--steps", "3")
    assert run.user == "1234:99" and plan.owner is None
    assert run.env == {"WANDB_API_KEY": None}  # passed through, never on the command line
    assert [(m.target, m.read_only) for m in run.mounts] == [
        ("/workspace/data", True),
        ("/workspace/runs", False),
    ]
    assert plan.create == ((project / "runs").resolve(),)
    assert run.gpus is None  # a CPU variant
    prepare_mounts(plan)
    assert (project / "runs").is_dir()


def test_run_as_root_keeps_the_images_user(project: Path) -> None:
    (train,) = specs_of(project, "train")
    (project / "data").mkdir()
    plan = plan_run(train, project, host_uid=0, host_gid=0)
    assert plan.run.user is None and plan.owner == train.user.uid


def test_missing_read_only_mount_is_an_error(project: Path) -> None:
    (train,) = specs_of(project, "train")
    with pytest.raises(UsageError, match="does not exist"):
        plan_run(train, project, host_uid=1000, host_gid=1000)


def test_gpus_follow_the_host_and_the_variant(tmp_path: Path) -> None:
    project = make_project(
        tmp_path, "images:\n  train: {}\n  pinned: {kind: train, gpus: device=1}\n"
    )
    make_variant(project, "precompiled/cu128", cuda="12.8")
    train, pinned = plan_images(load_manifest(project))
    assert plan_run(train, project, gpus_present=True, host_uid=1).run.gpus == "all"
    assert plan_run(train, project, gpus_present=False, host_uid=1).run.gpus is None
    assert plan_run(pinned, project, gpus_present=False, host_uid=1).run.gpus == "device=1"
    off = replace(train, gpus="none")
    assert plan_run(off, project, gpus_present=True, host_uid=1).run.gpus is None


def test_projects_never_re_point_each_others_libtorch_image(tmp_path: Path) -> None:
    """Two projects on one machine, both on precompiled/cpu but with different files."""
    one = make_project(tmp_path, MANIFEST, name="one")
    two = make_project(tmp_path, MANIFEST, name="two")
    for project, content in ((one, b"\x7fELF one"), (two, b"\x7fELF two")):
        make_variant(project)
        (project / "libtorch/precompiled/cpu/lib/libc10.so").write_bytes(content)
    engine = FakeEngine()
    (first,) = build_images(specs_of(one, "train"), one, engine=engine, environ={"PIP_TOKEN": "x"})
    (second,) = build_images(specs_of(two, "train"), two, engine=engine, environ={"PIP_TOKEN": "x"})
    assert first.libtorch_image != second.libtorch_image
    stable_one = f"fdl-libtorch:{one.name}-precompiled-cpu"
    stable_two = f"fdl-libtorch:{two.name}-precompiled-cpu"
    assert stable_one != stable_two
    # after the second project's build, the first one's stable name still means its own files
    assert engine.images[stable_one].id == engine.images[first.libtorch_image].id
    assert engine.images[stable_two].id == engine.images[second.libtorch_image].id


def test_size_report_counts_the_profiles_packages_in_the_floor(tmp_path: Path) -> None:
    """A train profile's `packages:` (graphviz for floDl) are part of its floor: the
    layer that installs them, and no other layer above the base."""
    project = make_project(tmp_path, "images:\n  train:\n    packages: [graphviz]\n")
    make_variant(project)
    (train,) = specs_of(project, "train")
    engine = FakeEngine()
    base_layers = (Layer("ADD rootfs", 100),)
    engine.add_image(train.base, size=100, layers=base_layers)
    layers = (
        *base_layers,
        Layer("RUN /bin/sh -c apt-get update && apt-get install -y graphviz # buildkit", 70),
        Layer("RUN useradd", 10),
        Layer("COPY libs", 1000),
        Layer("COPY app", 50),
    )
    engine.add_image(train.tag, size=100 + 70 + 10 + 1000 + 50, layers=layers)
    listing = "990\t/opt/libtorch/lib/libtorch_cpu.so\n45\t/opt/app/bin/train\n"
    engine.files[(train.tag, "/opt/app/fdl-closure.tsv")] = {"fdl-closure.tsv": listing}

    report = size_report(train, engine=engine)

    assert report.packages == 70
    assert report.floor == 100 + 70 + 990 + 45
    assert report.overhead == pytest.approx((70 + 10 + 1000 + 50) / (70 + 990 + 45) - 1)
    assert report.to_json()["packages"] == 70
