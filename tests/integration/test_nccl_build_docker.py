"""fdl nccl build for real: the fake NCCL tree (tests/fixtures/fake-nccl) built in Docker
(fetch stage, then a compile stage with --network none), copied out, its fatbin checked,
installed under libtorch/nccl/builds/. No CUDA here: the tree's make hands out libraries
that fdl.binaries.synthetic made for the archs the test chose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.binaries import read_device_code
from tests.support.fake_nccl import fake_nccl_tree

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TOOLCHAIN_IMAGE = "fdl-test/nccl-toolchain:bookworm"
TOOLCHAIN = """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends make g++ python3 \\
    && rm -rf /var/lib/apt/lists/*
"""


@pytest.fixture(scope="module")
def toolchain_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    from fdl.engine import BuildSpec, default_engine
    from tests.conftest import BASE_IMAGE

    engine = default_engine()
    if not engine.image_exists(TOOLCHAIN_IMAGE):
        context = tmp_path_factory.mktemp("toolchain")
        engine.build(
            BuildSpec(
                context, dockerfile_text=TOOLCHAIN.format(base=BASE_IMAGE), tags=(TOOLCHAIN_IMAGE,)
            )
        )
    return TOOLCHAIN_IMAGE


def _args(source: Path, image: str, archs: str = "6.1;12.0") -> list[str]:
    return [
        "nccl", "build", "--tag", "v2.27.5-1", "--archs", archs, "--source", str(source),
        "--base-image", image, "--jobs", "2",
    ]  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    return {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}


def test_the_rigs_archs_are_built_checked_and_installed(
    run_fdl, tmp_path: Path, toolchain_image: str
) -> None:
    source = fake_nccl_tree(tmp_path / "nccl", {"sm_61-sm_120": ["sm_61", "sm_120"]})
    planned = run_fdl(
        [*_args(source, toolchain_image), "--dry-run", "--json"], env=_env(tmp_path), cwd=tmp_path
    )
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    result = run_fdl([*_args(source, toolchain_image), "--json"], env=_env(tmp_path), cwd=tmp_path)
    assert result.exit_code == 0, result.output
    built = json.loads(result.stdout)
    output = tmp_path / "home" / "libtorch" / "nccl" / "builds" / "v2.27.5-sm61-sm120"
    assert built["installed"] == plan["output"] == str(output)
    library = output / "lib" / "libnccl.so.2"
    assert library.resolve().name == "libnccl.so.2.27.5"
    assert read_device_code(library).cubin_archs == ("sm_61", "sm_120")
    assert (output / "include" / "nccl.h").is_file()
    record = json.loads((output / "nccl.json").read_text())
    assert (record["tag"], record["archs"]) == ("v2.27.5-1", ["sm_61", "sm_120"])
    assert sorted(p.name for p in output.parent.iterdir()) == ["v2.27.5-sm61-sm120"]


def test_a_library_without_code_for_an_arch_is_not_installed(
    run_fdl, tmp_path: Path, toolchain_image: str
) -> None:
    # the compiler "succeeds" but leaves sm_120 out: fdl's fatbin check catches it
    source = fake_nccl_tree(tmp_path / "nccl", {"sm_61-sm_120": ["sm_61"]})
    result = run_fdl(_args(source, toolchain_image), env=_env(tmp_path), cwd=tmp_path)
    assert result.exit_code == 1, result.output
    assert "holds no code for sm_120; nothing was installed" in result.stderr
    builds = tmp_path / "home" / "libtorch" / "nccl" / "builds"
    assert list(builds.iterdir()) == []


def test_a_failing_compile_writes_nothing(run_fdl, tmp_path: Path, toolchain_image: str) -> None:
    source = fake_nccl_tree(tmp_path / "nccl", {"sm_61": ["sm_61"]})
    result = run_fdl(_args(source, toolchain_image, archs="7.5"), env=_env(tmp_path), cwd=tmp_path)
    assert result.exit_code == 1, result.output
    assert "fake nvcc: cannot compile for sm_75" in result.output
    builds = tmp_path / "home" / "libtorch" / "nccl" / "builds"
    assert list(builds.iterdir()) == []


def test_a_second_build_of_the_same_output_stops_at_once(
    run_fdl, tmp_path: Path, toolchain_image: str
) -> None:
    from fdl.locking import FileLock

    source = fake_nccl_tree(tmp_path / "nccl", {"sm_61-sm_120": ["sm_61", "sm_120"]})
    lock = tmp_path / "home/libtorch/.locks/nccl-v2.27.5-sm61-sm120.lock"
    lock.parent.mkdir(parents=True)
    with FileLock(lock, purpose="fdl nccl build of v2.27.5-sm61-sm120"):
        result = run_fdl(_args(source, toolchain_image), env=_env(tmp_path), cwd=tmp_path)
    assert result.exit_code == 1, result.output
    assert "fdl nccl build of v2.27.5-sm61-sm120" in result.stderr
    assert not (tmp_path / "home/libtorch/nccl/builds/v2.27.5-sm61-sm120").exists()
