"""The compatibility tables are consistent with each other."""

from __future__ import annotations

import itertools
import re
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
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
from fdl.errors import NetworkError
from fdl.net import read_range
from fdl.refresh._wheels import wheel_metadata
from tests.support.artefacts import cached_dir, pypi_wheel, skip_or_fail
from tests.support.wheel_headers import pypi_wheel_url

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
        assert re.fullmatch(r"\d+\.\d+\.\d+", kit.image.version), kit.image.version
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

    # The wheels' Requires-Python on PyPI (https://pypi.org/pypi/torch/json, 2026-11-28):
    # 2.0-2.5 >=3.8.0, 2.6-2.8 >=3.9.0, 2.9-2.14.1 >=3.10, 2.15.0 >=3.11 (cp311-cp315 only).
    pypi = {"2.5": "3.8", "2.6": "3.9", "2.8": "3.9", "2.9": "3.10", "2.14": "3.10", "2.15": "3.11"}
    for version, python in pypi.items():
        assert release(version).source.python_min == python, version


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


_LINUX = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}


def _requires(metadata: str, extras: frozenset[str] = frozenset()) -> list[Requirement]:
    """The ``Requires-Dist`` of a METADATA that apply on Linux x86_64 with ``extras``."""
    found = []
    for line in re.findall(r"^Requires-Dist: (.+)$", metadata, re.M):
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({**_LINUX, "extra": e}) for e in {"", *extras}):
            found.append(requirement)
    return found


def _torch_metadata(folder: Path) -> None:
    """torch 2.14.1's METADATA, read from its Linux x86_64 wheel (cu130) by range."""
    url = pypi_wheel_url("2.14.1", "manylinux_2_28_x86_64.whl")
    (folder / "METADATA").write_text(wheel_metadata(url, read_range))


@pytest.mark.network
def test_cu13_wheel_names_are_the_ones_torch_cu130_brings() -> None:
    """Each CUDA 13 library's wheel is one a Linux install of torch 2.14.1 (cu130) brings:
    named by torch's METADATA or by the cuda-toolkit extras it asks for (nvidia-cuda-runtime
    through cuda-toolkit[cudart]). Both METADATA files are kept in the tests' cache."""
    try:
        folder = cached_dir("metadata/torch-2.14.1-linux-x86_64", _torch_metadata)
    except (OSError, LookupError, NetworkError) as exc:
        skip_or_fail(f"the METADATA of torch 2.14.1 cannot be read from PyPI: {exc}")
    torch = _requires((folder / "METADATA").read_text())
    toolkit = next(r for r in torch if r.name == "cuda-toolkit")
    (pin,) = toolkit.specifier
    with zipfile.ZipFile(pypi_wheel(f"cuda-toolkit=={pin.version}")) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        brought = _requires(wheel.read(member).decode(), frozenset(toolkit.extras))
    names = {canonicalize_name(r.name) for r in [*torch, *brought]}
    assert {"nvidia-cudnn-cu13", "nvidia-cuda-runtime"} <= names
    for lib in runtime_libraries("13"):
        if lib.wheel:
            assert lib.wheel in names, lib.wheel


def test_image_pins_name_final_toolkit_releases() -> None:
    """cuda-toolkit on PyPI (2026-11-28) has 13.3.0, 13.3.1 and 13.4.0rc1, 13.4.1-13.4.3:
    13.4.0 was a developer preview (CUDA 13.4's release notes: GA is 13.4.1), and an
    unchecked pin is the newest final release of its minor."""
    assert toolkit("13.3").image.version == "13.3.1"
    assert toolkit("13.4").image.version == "13.4.3"


def test_every_cuda_12_and_13_toolkit_has_a_ptx_jit_row_and_floors_never_fall() -> None:
    """A toolkit without a known own driver still has a row that says so (`min: null`),
    and the floor used for it is the newest older one, never lower."""
    from fdl.compat import ptx_jit_floor

    rows = load_table("cuda")["ptx_jit_driver"]["versions"]
    previous = (0,)
    for kit in toolkits():
        if kit.major < 12:
            continue
        assert kit.version in rows, kit.version
        floor = ptx_jit_floor(kit.version)
        assert floor is not None, kit.version
        assert version_key(floor.driver) >= previous, kit.version
        previous = version_key(floor.driver)
        row = rows.get(kit.version)
        if isinstance(row, dict) and row.get("min") is None:
            assert row.get("verified") is False and row.get("source"), kit.version
            assert floor.toolkit != kit.version and not floor.verified
