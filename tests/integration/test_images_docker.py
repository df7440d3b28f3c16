"""fdl's images against the real docker engine: the dev and train images of the C++
training program (tests/fixtures/cpp-train) on the CPU variant made from the local
torch wheel, built FROM the local base image (no registry pulls).

The train image must train, run as non-root, carry fdl's labels, hold no compiler,
headers or libtorch_python.so, and stay within 10% of its floor above the base; a
rebuild after a source change must reuse every layer but the last ones. Images are
named per run and removed afterwards; BuildKit's apt and build caches are kept, so a
second run of this module is much faster than the first.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml

from fdl.engine import DockerEngine, Mount, RunSpec
from fdl.images import ImageSpec, plan_images, render_compose
from fdl.images._build import BuiltImage, build_images
from fdl.images._size import size_report
from fdl.manifest import load_manifest
from fdl.runner import SubprocessRunner
from tests.support.images import cpu_variant_from_wheel, link_variant, make_project

pytestmark = pytest.mark.docker

RUN_ID = uuid.uuid4().hex[:10]
BASE_IMAGE = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")
MANIFEST = f"""\
description: fdl image integration test
images:
  dev:
    base: {BASE_IMAGE}
    tag: fdl-it-{RUN_ID}-dev:latest
  train:
    base: {BASE_IMAGE}
    tag: fdl-it-{RUN_ID}-train:latest
    args: [--steps, "8"]
    mounts: ["./runs:/workspace/runs"]
"""
LOSS = re.compile(r"^step (\d+) loss ([0-9.eE+-]+)$", re.M)


@dataclass
class Built:
    """The module's project and the images built from it."""

    engine: DockerEngine
    project: Path
    specs: dict[str, ImageSpec]
    images: dict[str, BuiltImage]
    made: list[str]


@pytest.fixture(scope="module")
def cpu_variant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU libtorch from the local wheel (about 460 MB, unzipped once per module)."""
    return cpu_variant_from_wheel(tmp_path_factory.mktemp("variants"))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, cpu_variant: Path) -> Iterator[Built]:
    engine = DockerEngine(SubprocessRunner())
    project = make_project(tmp_path_factory.mktemp("project"), MANIFEST)
    link_variant(cpu_variant, project)
    specs = {spec.profile: spec for spec in plan_images(load_manifest(project))}
    made: list[str] = []
    # the project's own stable name of its variant image (no other project uses it)
    stable = specs["train"].variant.image if specs["train"].variant else None
    assert stable == f"fdl-libtorch:{project.name}-precompiled-cpu"
    try:
        results = build_images(list(specs.values()), project, engine=engine)
        made.extend(spec.tag for spec in specs.values())
        libtorch = results[-1].libtorch_image
        assert libtorch is not None
        made.extend((libtorch, stable))
        yield Built(engine, project, specs, {r.spec.profile: r for r in results}, made)
    finally:
        for name in made:
            engine.remove_image(name, force=True)


def _losses(text: str) -> list[float]:
    return [float(value) for _, value in LOSS.findall(text)]


def test_train_image_trains(built: Built) -> None:
    result = built.engine.run(RunSpec(built.specs["train"].tag, ("--steps", "6")))
    assert result.ok, result.stderr
    losses = _losses(result.stdout)
    assert len(losses) == 6
    assert losses[-1] < losses[0]


def test_train_image_runs_as_non_root_with_labels(built: Built) -> None:
    spec = built.specs["train"]
    info = built.engine.inspect_image(spec.tag)
    assert info.user == "10001:10001"
    result = built.engine.run(RunSpec(spec.tag, ("-u",), entrypoint="id"))
    assert result.stdout.strip() == "10001"
    labels = info.labels
    assert labels["dev.fdl.kind"] == "train"
    assert labels["dev.fdl.torch"] == "2.13.0"
    assert labels["dev.fdl.cuda"] == "none"
    assert labels["dev.fdl.archs"] == "cpu"
    assert labels["dev.fdl.variant"] == "precompiled/cpu"
    assert labels["dev.fdl.manifest-hash"].startswith("sha256:")
    assert labels["dev.fdl.version"]
    assert labels["org.opencontainers.image.base.name"] == BASE_IMAGE


def test_train_image_holds_no_toolchain_headers_or_python_bindings(built: Built) -> None:
    script = (
        "for tool in gcc g++ cc c++ cmake make ld as strip; do "
        "command -v $tool && echo FOUND $tool; done; "
        "find / -xdev \\( -name '*.h' -o -name '*.hpp' -o -name '*.a' "
        "-o -name 'libtorch_python.so' -o -name 'TorchConfig.cmake' \\) -print"
    )
    tag = built.specs["train"].tag  # as root, so that find sees every directory
    result = built.engine.run(RunSpec(tag, ("-c", script), entrypoint="sh", user="0:0"))
    assert result.ok, result.stderr
    assert result.stdout.strip() == ""


def test_final_stage_adds_no_package_lists_or_caches(built: Built) -> None:
    """What the base has under apt's directories, the image has, and nothing more."""
    script = "find /var/lib/apt/lists /var/cache/apt /var/cache/debconf -type f 2>/dev/null | sort"
    base = built.engine.run(RunSpec(BASE_IMAGE, ("sh", "-c", script)))
    train = built.engine.run(RunSpec(built.specs["train"].tag, ("-c", script), entrypoint="sh"))
    assert train.stdout == base.stdout


def test_train_image_is_within_ten_percent_of_its_floor(built: Built) -> None:
    report = size_report(built.specs["train"], engine=built.engine)
    assert report.closure is not None
    paths = [path for path, _ in report.closure]
    assert "/opt/app/bin/train" in paths
    assert "/opt/libtorch/lib/libtorch_cpu.so" in paths
    assert not any(path.endswith("libtorch_python.so") for path in paths)
    assert report.overhead is not None and report.overhead < 0.10, report.to_json()
    added = [layer.created_by for layer in report.layers if not layer.in_base and layer.size]
    assert len(added) == 3, added  # the user, the libraries, the program


def test_dev_image_builds_against_the_mounted_variant(built: Built) -> None:
    spec = built.specs["dev"]
    info = built.engine.inspect_image(spec.tag)
    assert info.user == "1000:1000"
    assert info.env["CMAKE_PREFIX_PATH"] == "/opt/libtorch"
    result = built.engine.run(
        RunSpec(
            spec.tag,
            ("sh", "-c", "cmake -S /workspace -B /tmp/build > /tmp/log 2>&1; tail -1 /tmp/log"),
            mounts=(
                Mount(str(built.project), "/workspace", read_only=True),
                Mount(
                    str(built.project / "libtorch/precompiled/cpu"), "/opt/libtorch", read_only=True
                ),
            ),
        )
    )
    assert result.ok, result.stdout + result.stderr
    assert "Build files have been written to: /tmp/build" in result.stdout


def test_compose_file_is_valid_for_docker_compose(built: Built) -> None:
    compose = built.engine.compose()
    path = built.project / "docker-compose.yml"
    path.write_text(render_compose(list(built.specs.values())), encoding="utf-8")
    (built.project / "dev.Dockerfile").write_text("FROM scratch\n", encoding="utf-8")
    (built.project / "train.Dockerfile").write_text("FROM scratch\n", encoding="utf-8")
    env = {**os.environ, **compose.env, "FDL_UID": "1234"}
    env.pop("LIBTORCH_HOST_PATH", None)  # the default: the project's variant
    proc = subprocess.run(
        [*compose.argv, "-f", str(path), "config"],
        cwd=built.project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    services = yaml.safe_load(proc.stdout)["services"]
    assert services["dev"]["user"] == "1234:1000"
    volumes = [str(v) for v in services["dev"]["volumes"]]
    assert any(str(built.project / "libtorch/precompiled/cpu") in v for v in volumes)


def test_fdl_image_run_writes_into_the_mounted_directory(built: Built, fdl_process) -> None:
    result = fdl_process(
        ["image", "run", "train", "--", "--steps", "3", "--out", "/workspace/runs"],
        cwd=built.project,
        timeout=300,
    )
    assert result.exit_code == 0, result.output
    assert len(_losses(result.stdout)) == 3
    lines = (built.project / "runs" / "loss.txt").read_text().split()
    assert len(lines) == 3


def test_rebuild_after_a_source_change_reuses_all_but_the_last_layers(built: Built) -> None:
    spec = built.specs["train"]
    source = built.project / "src" / "main.cpp"
    source.write_text(
        source.read_text().replace('"step "', f'"[{RUN_ID}] step "'), encoding="utf-8"
    )
    rebuilt = replace(spec, tag=f"fdl-it-{RUN_ID}-rebuilt:latest")
    built.made.append(rebuilt.tag)
    (result,) = build_images([rebuilt], built.project, engine=built.engine)
    steps = result.result.steps
    names = [step.name for step in steps if not step.cached]  # built again
    copy_source = next(i for i, step in enumerate(steps) if step.name == "COPY . .")
    before = [step for step in steps[:copy_source] if step.stage.startswith("build")]
    assert before and all(step.cached for step in before), steps
    runtime = [step for step in steps if step.stage.startswith("runtime")]
    runtime.sort(key=lambda step: int(step.stage.split()[1].split("/")[0]))  # Dockerfile order
    program = next(i for i, step in enumerate(runtime) if "/out/app/" in step.name)
    # The user and the libraries come from the cache; the program's layer and the
    # instructions after it are all that is new.
    assert [step.cached for step in runtime[:program]] == [True] * program, runtime
    assert not runtime[program].cached
    assert any("/out/root/" in step.name for step in runtime[:program])
    assert "COPY . ." in names
    run = built.engine.run(RunSpec(rebuilt.tag, ("--steps", "1")))
    assert f"[{RUN_ID}] step 1 loss" in run.stdout
