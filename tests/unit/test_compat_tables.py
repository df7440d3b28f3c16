"""The compatibility tables are consistent with each other."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from fdl._assets import data_dir
from fdl.compat import (
    Capability,
    build_switches,
    family_names,
    known_capabilities,
    parse_archs,
    release,
    releases,
    runtime_libraries,
    toolkit,
    toolkits,
    version_key,
)
from fdl.compat._data import TABLES, load_table
from fdl.compat.archs import family_archs
from fdl.compat.runtime import image_flavour_libraries
from tests.support.artefacts import cached_dir, skip_or_fail

_TAG = re.compile(
    r"^nvidia/cuda:\d+\.\d+\.\d+-(base|runtime|devel|cudnn8?9?-runtime|cudnn8?9?-devel)-ubuntu\d\d\.04$"
)


@pytest.mark.parametrize("name", TABLES)
def test_tables_are_shipped_in_the_package_with_schema_and_sources(name: str) -> None:
    path = data_dir() / "compat" / f"{name}.yaml"
    assert path.is_file()
    assert path.resolve().is_relative_to(data_dir().parent.resolve())
    table = load_table(name)
    assert table["schema_version"] == 1
    assert len(table["sources"]) > 20


def test_toolkits_cover_the_required_versions() -> None:
    versions = [t.version for t in toolkits()]
    assert versions == sorted(versions, key=version_key)
    for wanted in ["11.8", "12.0", "12.4", "12.6", "12.8", "12.9", "13.0", "13.1", "13.2"]:
        assert wanted in versions


def test_every_toolkit_arch_is_a_known_capability() -> None:
    known = set(known_capabilities())
    for kit in toolkits():
        assert set(kit.targets.capabilities) <= known, kit.version
        assert all(t.suffix == "" or t.capability >= Capability(9, 0) for t in kit.targets)


def test_facts_about_arch_lists() -> None:
    assert toolkit("12.0").targets == toolkit("12.6").targets
    assert set(toolkit("12.6").targets) < set(toolkit("12.8").targets)
    assert set(toolkit("12.8").targets) < set(toolkit("12.9").targets)
    assert toolkit("13.0").targets == toolkit("13.2").targets
    assert not toolkit("13.0").problems(parse_archs("7.5;11.0;12.1f"))
    assert toolkit("13.0").problems(parse_archs("6.1"))
    assert "sm_101" in toolkit("13.0").problems(parse_archs("10.1"))[0]


def test_driver_floors_and_compilers_grow_with_the_toolkit() -> None:
    kits = toolkits()
    for older, newer in itertools.pairwise(kits):
        assert version_key(older.driver_min) <= version_key(newer.driver_min)
        assert older.compilers.gcc <= newer.compilers.gcc
        assert older.compilers.clang <= newer.compilers.clang
    assert toolkit("12.4").driver_min == "525"
    assert toolkit("13.1").driver_min == "580"


def test_image_tags_are_well_formed() -> None:
    from fdl.compat import image_tag

    flavours = load_table("cuda")["image_flavours"]
    for kit in toolkits():
        assert kit.image.version.startswith(kit.version + ".")
        for ubuntu in kit.image.ubuntu:
            for flavour in flavours:
                assert _TAG.match(image_tag(kit.version, flavour, ubuntu)), (kit.version, flavour)
        if kit.major >= 13:
            assert "20.04" not in kit.image.ubuntu


def test_families_reference_known_archs() -> None:
    known = set(known_capabilities())
    for name in family_names():
        assert set(family_archs(name)) <= known
    assert [str(c) for c in family_archs("Pascal")] == ["6.0", "6.1"]
    assert [str(c) for c in family_archs("blackwell")] == ["10.0", "12.0"]
    for name in ["Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell"]:
        assert name in family_names()


def test_every_pytorch_variant_names_a_known_cuda_that_compiles_its_archs() -> None:
    for rel in releases():
        assert sum(v.default for v in rel.variants) == 1, rel.version
        assert any(v.is_cpu for v in rel.variants), rel.version
        assert all(p.startswith(rel.version + ".") for p in rel.patches)
        for variant in rel.variants:
            if variant.is_cpu:
                assert not variant.targets
                continue
            assert variant.cuda is not None
            kit = toolkit(variant.cuda)
            assert kit.version == variant.cuda
            assert variant.name == kit.variant
            assert not kit.problems(variant.targets), (rel.version, variant.name)
            for observation in variant.observed:
                assert observation.version in rel.patches
                assert not kit.problems(observation.targets | observation.extra_kernels)


def test_release_facts() -> None:
    assert next(r.version for r in releases()) == "2.0"
    assert releases()[-1].version == "2.15"
    assert "2.13.0" in release("2.13").patches and "2.14.1" in release("2.14").patches
    for rel in releases():
        newer = version_key(rel.version) >= (2, 9)
        assert rel.source.cmake_min == ("3.27" if newer else "3.18")
        assert rel.source.cxx_standard == (20 if version_key(rel.version) >= (2, 13) else 17)
        if newer:
            assert rel.source.python_min == "3.10"


def test_runtime_tables_name_known_flavours_and_switches() -> None:
    switches = {s.name for s in build_switches()}
    ids = set()
    for major in ("12", "13"):
        for lib in runtime_libraries(major):
            ids.add(lib.id)
            assert lib.sonames
            assert set(lib.unless) <= switches | {"USE_NCCL"}
            assert lib.system or lib.wheel
    for flavour in load_table("cuda")["image_flavours"]:
        assert image_flavour_libraries(flavour) <= ids
    for switch in build_switches():
        assert set(switch.drops_libraries) <= ids


def _pip_resolves(spec: str, folder: Path) -> None:
    """pip's report (``report.json``) of what it would install for ``spec`` on this Python:
    it reads the packages' metadata from the index, and downloads no wheel that has some."""
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-cache-dir",
            "--ignore-installed", "--only-binary=:all:", "--report", str(folder / "report.json"), spec]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise OSError(f"pip could not resolve {spec}: {done.stderr.strip()[-1500:]}")


@pytest.mark.slow
@pytest.mark.network
def test_cu13_wheel_names_are_what_pip_installs_with_torch_cu130() -> None:
    """Each CUDA 13 library's wheel is one pip installs with torch 2.14.1 (cu130, Linux):
    named by torch or by the cuda-toolkit extras it requires (nvidia-cuda-runtime through
    cuda-toolkit[cudart]). pip's resolution is kept in the tests' cache."""
    try:
        resolved = cached_dir(
            "pip-report/torch-2.14.1", lambda d: _pip_resolves("torch==2.14.1", d)
        )
    except OSError as exc:
        skip_or_fail(str(exc))
    report = json.loads((resolved / "report.json").read_text())
    names = {canonicalize_name(item["metadata"]["name"]) for item in report["install"]}
    assert "torch" in names and "cuda-toolkit" in names
    for lib in runtime_libraries("13"):
        if lib.wheel:
            assert lib.wheel in names, lib.wheel
