"""fdl nccl build's planner: the version matched to the libtorch, the archs, the toolkit,
the recipe; bad input refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.errors import EnvironmentProblem, UsageError
from fdl.nccl import NcclFacts, NcclRequest, plan_nccl_build
from fdl.nccl._facts import scan_nccl_version
from fdl.nccl._plan import validate_tag


def facts(tmp_path: Path, **kw: object) -> NcclFacts:
    values: dict[str, object] = {
        "libtorch_dir": tmp_path / "libtorch",
        "variant": "precompiled/cu128",
        "cuda": "12.8",
        "torch": "2.10.0",
    }
    values.update(kw)
    return NcclFacts(**values)  # type: ignore[arg-type]


def test_plan_matches_libtorchs_nccl_and_the_gpus_here(tmp_path: Path) -> None:
    plan = plan_nccl_build(
        NcclRequest(),
        facts(tmp_path, banner_version="2.27.5", gpus=("sm_120", "sm_61", "sm_61"), cpus=6),
    )
    assert plan.tag == "v2.27.5-1"
    assert plan.archs == ("sm_61", "sm_120")
    assert plan.gencode == (
        "-gencode=arch=compute_61,code=sm_61 -gencode=arch=compute_120,code=sm_120"
    )
    assert plan.base_image == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert plan.output == tmp_path / "libtorch" / "nccl" / "builds" / "v2.27.5-sm61-sm120"
    assert plan.jobs == 6 and plan.source_kind == "git"
    assert "git clone --depth 1 --branch v2.27.5-1 https://github.com/NVIDIA/nccl.git" in (
        plan.dockerfile
    )
    # the value with spaces reaches make as one quoted shell word
    assert (
        "NVCC_GENCODE='-gencode=arch=compute_61,code=sm_61 -gencode=arch=compute_120,code=sm_120'"
        in plan.dockerfile
    )
    assert json.loads(json.dumps(plan.to_json()))["ld_preload"].endswith("lib/libnccl.so.2")


def test_without_a_banner_the_wheel_torch_pins_gives_the_version(tmp_path: Path) -> None:
    plan = plan_nccl_build(NcclRequest(archs="6.1;12.0"), facts(tmp_path, torch="2.11.0"))
    assert plan.tag == "v2.28.9-1"
    assert "nvidia-nccl-cu13==2.28.9" in plan.tag_from


def test_given_tag_archs_and_source_dir(tmp_path: Path) -> None:
    request = NcclRequest(tag="v2.26.2-1", archs="sm_61,compute_120", source=str(tmp_path), jobs=3)
    plan = plan_nccl_build(
        request, facts(tmp_path, source_is_dir=True, source_has_makefile=True, cuda="12.9")
    )
    assert (plan.tag, plan.version, plan.archs) == ("v2.26.2-1", "2.26.2", ("sm_61", "compute_120"))
    assert plan.output.name == "v2.26.2-sm61-ptx120"
    assert plan.source_kind == "dir" and "git clone" not in plan.dockerfile
    assert "--mount=type=bind,source=src" in plan.dockerfile
    assert plan.base_image == "nvidia/cuda:12.9.1-devel-ubuntu24.04"


@pytest.mark.parametrize(
    "tag", ["v2.27.5-1;rm -rf /", "$(id)", "v2.27.5-1 extra", "`x`", "", "a" * 80, "v2'1"]
)
def test_a_tag_with_shell_characters_is_refused(tmp_path: Path, tag: str) -> None:
    with pytest.raises(UsageError, match="not an NCCL git tag"):
        plan_nccl_build(NcclRequest(tag=tag, archs="6.1"), facts(tmp_path))


def test_a_ref_that_names_no_release_is_refused(tmp_path: Path) -> None:
    assert validate_tag("master") == "master"
    with pytest.raises(UsageError, match="names no NCCL release"):
        plan_nccl_build(NcclRequest(tag="master", archs="6.1"), facts(tmp_path))


@pytest.mark.parametrize("archs", ["banana", "6.1;99.9", ";", "6.1;$(id)"])
def test_archs_that_are_not_archs_are_refused(tmp_path: Path, archs: str) -> None:
    with pytest.raises(UsageError):
        plan_nccl_build(NcclRequest(tag="v2.27.5-1", archs=archs), facts(tmp_path))


def test_a_source_without_makefile_or_a_bad_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no Makefile"):
        plan_nccl_build(
            NcclRequest(archs="6.1", source=str(tmp_path)), facts(tmp_path, source_is_dir=True)
        )
    with pytest.raises(UsageError, match="neither a directory"):
        plan_nccl_build(NcclRequest(archs="6.1", source="https://x/';id;'"), facts(tmp_path))
    with pytest.raises(UsageError, match="not an image reference"):
        plan_nccl_build(NcclRequest(archs="6.1", base_image="x; id"), facts(tmp_path))


def test_nothing_to_take_version_or_archs_from(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="no NVIDIA GPU"):
        plan_nccl_build(NcclRequest(tag="v2.27.5-1"), facts(tmp_path))
    with pytest.raises(EnvironmentProblem, match="no active libtorch"):
        plan_nccl_build(NcclRequest(archs="6.1"), facts(tmp_path, variant=None, torch=None))
    with pytest.raises(EnvironmentProblem, match=r"libtorch_cuda\.so: no NCCL version banner"):
        plan_nccl_build(NcclRequest(archs="6.1"), facts(tmp_path, torch="1.0.0"))


def test_the_banner_is_read_across_chunks_and_not_from_version_floors(tmp_path: Path) -> None:
    library = tmp_path / "libtorch_cuda.so"
    floor = b"NCCL version 2.18.0 or later is required"
    library.write_bytes(floor + b"\0" * ((8 << 20) - 30) + b"xx NCCL version 2.27.5+cuda12.8\0")
    assert scan_nccl_version(library) == "2.27.5"
    assert scan_nccl_version(library, limit=1 << 20) is None
    library.write_bytes(floor)
    assert scan_nccl_version(library) is None
    assert scan_nccl_version(tmp_path) is None
    assert scan_nccl_version(tmp_path / "missing") is None


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "libtorch_cuda.so"
    os.mkfifo(fifo)
    assert scan_nccl_version(fifo) is None


def test_a_toolkit_that_cannot_emit_an_arch_is_said_with_one_that_can(tmp_path: Path) -> None:
    # torch 2.11 pins CUDA 13, whose nvcc has no Pascal: the rig's sm_61 cannot be built
    with pytest.raises(EnvironmentProblem, match=r"CUDA 13\.0 cannot build NCCL") as caught:
        plan_nccl_build(
            NcclRequest(tag="v2.28.9-1", archs="6.1;12.0"), facts(tmp_path, cuda="13.0")
        )
    assert caught.value.hint is not None
    assert "--base-image nvidia/cuda:12.9.1-devel-ubuntu24.04" in caught.value.hint
    given = plan_nccl_build(
        NcclRequest(tag="v2.28.9-1", archs="6.1;12.0", base_image="my/cuda:12.9"),
        facts(tmp_path, cuda="13.0"),
    )
    assert given.base_image == "my/cuda:12.9"
    assert "the toolkit inside my/cuda:12.9 is not checked against the archs" in given.notes


def test_a_rocm_variant_gets_no_nccl_build(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="ROCm build: it carries RCCL"):
        plan_nccl_build(
            NcclRequest(tag="v2.27.5-1", archs="6.1"),
            facts(tmp_path, variant="precompiled/rocm70", vendor="amd", cuda=None),
        )


def test_a_banner_across_the_chunk_boundary_is_read(tmp_path: Path) -> None:
    library = tmp_path / "libtorch_cuda.so"
    banner = b"NCCL version 2.26.2+cuda12.6"
    library.write_bytes(b"\0" * ((8 << 20) - 10) + banner + b"\0")
    assert scan_nccl_version(library) == "2.26.2"


def test_each_repository_keeps_its_own_checkout(tmp_path: Path) -> None:
    nvidia = plan_nccl_build(NcclRequest(tag="v2.27.5-1", archs="6.1"), facts(tmp_path))
    fork = plan_nccl_build(
        NcclRequest(tag="v2.27.5-1", archs="6.1", source="https://git.example.org/me/nccl.git"),
        facts(tmp_path),
    )
    ids = [
        next(w for w in p.dockerfile.split() if w.startswith("--mount=type=cache,id="))
        for p in (nvidia, fork)
    ]
    assert ids[0] != ids[1]
    assert "git clone --depth 1 --branch v2.27.5-1 https://git.example.org/me/nccl.git" in (
        fork.dockerfile
    )
