"""The floDl template's training image, built and run for real: `fdl image build train`
and `fdl image run train` on a fresh `fdl init --template flodl` project.

The project is the template's as written, with three overrides on the command line:
the local base image (no registry is reachable), a tag named per run, and
`toolchain: host`: rustup cannot download a toolchain here, so the build stage mounts
this machine's Rust (1.95.0, the project's rust-toolchain.toml pin, checked) and the
crates of Cargo.lock vendored by the host's cargo. libtorch is the CPU view of torch
2.10.0 (the release of the template's floDl, 0.8.0; tests/support/cpu_view.py), kept
unpacked in the tests' cache and hard-linked into the project, so its image keeps its key
between runs.

Checked: the program trains in the image (the losses of 3 epochs are read, the last
below the first), the runtime image holds no cargo, rustc or Rust library, and its size
is within 10% of its floor above the base (the bound of the C++ image,
tests/integration/test_images_docker.py; the floor counts the graphviz the template
asks for at run time).

Last, a change to main.rs (named per run) is built again: cargo compiles the program's
crate only (its target directory is a BuildKit cache), every step before the project's
files is reused, and the new program runs.

Cost (2 shared cores): with floDl 0.8.0, cold, the module took 11 min 45 s at load 12-14
(three other builds beside it). With floDl 0.5.3: cold about 10 min (floDl's release build with thin LTO about
6 min, the build stage's apt step about 2); BuildKit keeps its apt caches, the cargo
target directory (keyed by the project's fixed name) and the images of the variant and
the toolchain, so a second run reuses every layer of the template's program (about
40 s with the training runs) and recompiles only the changed crate (about 90 s). A cache helper of its own: the unpacked
variant under $FDL_TEST_CACHE/variants (tests/support/cargo.py is the native tests').
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from fdl.compat import framework_release
from fdl.engine import DockerEngine, RunSpec
from fdl.images import plan_images
from fdl.images._build import build_images
from fdl.images._size import size_report
from fdl.manifest import load_manifest
from fdl.runner import SubprocessRunner
from fdl.scaffold import template
from tests.conftest import BASE_IMAGE, run_fdl_process
from tests.support.artefacts import cache_dir, skip_or_fail
from tests.support.cpu_view import install_cpu_view
from tests.support.images import link_variant

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# the torch of the floDl release the template writes (fdl/data/compat/frameworks.yaml)
TORCH = framework_release(*(template("flodl").framework or ("flodl", ""))).torch
RUN_ID = uuid.uuid4().hex[:10]
TAG = f"fdl-it-{RUN_ID}-flodl-train:latest"
# A fixed project name: BuildKit's cargo target cache is keyed by it.
PROJECT = "fdl-it-flodl-image"
SETS = [
    f"images.train.base={BASE_IMAGE}",
    "images.train.toolchain=host",
    f"images.train.tag={TAG}",
]
EPOCH = re.compile(r"epoch (\d+)/(\d+)\s+loss=([0-9.eE+-]+)")


@dataclass
class Built:
    engine: DockerEngine
    project: Path
    build_output: str


def _cpu_variant() -> Path:
    """The CPU view of torch 2.10.0, unpacked once into the tests' cache."""
    target = cache_dir() / "variants" / f"cpu-{TORCH}"
    directory = target / "home" / "libtorch" / "precompiled" / "cpu"
    if (directory / "variant.json").is_file():
        return directory
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    install_cpu_view(partial, home=partial / "home", torch=TORCH)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)  # complete, or not there: never half a variant
    return directory


def _fdl(args: list[str], cwd: Path, timeout: float) -> str:
    result = run_fdl_process(args, cwd=cwd, timeout=timeout)
    assert result.exit_code == 0, result.output[-6000:]
    return result.output


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    if shutil.which("cargo") is None or shutil.which("rustc") is None:
        skip_or_fail("no Rust on this machine (rustup toolchain install 1.95.0)")
    variant = _cpu_variant()
    root = tmp_path_factory.mktemp("flodl-image")
    _fdl(["init", PROJECT, "--template", "flodl", "--mode", "native", "-y"], root, 120)
    project = root / PROJECT
    link_variant(variant, project)
    engine = DockerEngine(SubprocessRunner())
    try:
        sets = [word for value in SETS for word in ("--set", value)]
        output = _fdl([*sets, "image", "build", "train"], project, 3000)
        yield Built(engine, project, output)
    finally:
        engine.remove_image(TAG, force=True)


def test_the_program_trains_in_its_image(built: Built) -> None:
    sets = [word for value in SETS for word in ("--set", value)]
    output = _fdl([*sets, "image", "run", "train", "--", "--epochs", "3"], built.project, 600)
    epochs = [(int(n), int(total), float(loss)) for n, total, loss in EPOCH.findall(output)]
    assert [(n, total) for n, total, _ in epochs] == [(1, 3), (2, 3), (3, 3)], output
    assert epochs[-1][2] < epochs[0][2], output


def test_the_build_took_rust_from_the_host(built: Built) -> None:
    assert "making the Rust image fdl-rust:1.95.0-" in built.build_output or (
        "Rust image fdl-rust:1.95.0-" in built.build_output
    ), built.build_output[-3000:]
    assert "vendoring the crates" in built.build_output


def test_the_runtime_image_holds_no_rust(built: Built) -> None:
    script = (
        "for tool in cargo rustc rustup cc gcc ld; do command -v $tool && echo FOUND $tool; done; "
        "find / -xdev \\( -name 'librustc_driver*' -o -name '*.rlib' -o -name 'rustlib' "
        "-o -path /opt/rust -o -path /.cargo \\) -print"
    )
    result = built.engine.run(RunSpec(TAG, ("-c", script), entrypoint="sh", user="0:0"))
    assert result.ok, result.stderr
    assert result.stdout.strip() == ""


def test_the_image_is_within_ten_percent_of_its_floor(built: Built) -> None:
    (spec,) = plan_images(load_manifest(built.project, sets=SETS), ["train"])
    report = size_report(replace(spec, tag=TAG), engine=built.engine)
    assert report.closure is not None
    paths = [path for path, _ in report.closure]
    assert f"/opt/app/bin/{spec.program_name}" in paths  # the crate's name: fdl_it_flodl_image
    assert "/opt/libtorch/lib/libtorch_cpu.so" in paths
    assert report.packages > 0  # graphviz, which the template asks for at run time
    assert report.overhead is not None and report.overhead < 0.10, report.to_json()


def test_docker_can_run_the_image_by_its_entrypoint(built: Built) -> None:
    """Without fdl: the image's own entrypoint and environment find libtorch."""
    proc = subprocess.run(
        ["docker", "run", "--rm", TAG, "--epochs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained 1 epochs: loss" in proc.stdout


def test_a_source_change_rebuilds_the_crate_not_its_dependencies(built: Built) -> None:
    """cargo's target directory lives in a BuildKit cache: after a change to main.rs the
    build step compiles the program's crate again, never floDl or its dependencies, and
    every step before the project's files is reused."""
    source = built.project / "src" / "main.rs"
    source.write_text(
        source.read_text().replace('"trained {num_epochs}', f'"[{RUN_ID}] trained {{num_epochs}}'),
        encoding="utf-8",
    )
    (spec,) = plan_images(load_manifest(built.project, sets=SETS), ["train"])
    lines: list[str] = []
    (result,) = build_images([spec], built.project, engine=built.engine, on_line=lines.append)
    compiled = [line.split("Compiling ", 1)[1] for line in lines if "Compiling " in line]
    assert [name.split()[0] for name in compiled] == [spec.program_name], compiled
    steps = result.result.steps
    copy_source = next(i for i, step in enumerate(steps) if step.name == "COPY . .")
    before = [step for step in steps[:copy_source] if step.stage.startswith("build")]
    assert before and all(step.cached for step in before), steps
    run = built.engine.run(RunSpec(TAG, ("--epochs", "1")))
    assert f"[{RUN_ID}] trained 1 epochs: loss" in run.stdout, run.stdout + run.stderr
