"""Where a variant comes from: the VariantSource interface and install_source."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fdl.errors import UsageError
from fdl.libtorch import (
    FromArchive,
    FromBuild,
    FromCpuView,
    FromDirectory,
    FromRegistry,
    FromWheel,
    Target,
    VariantInfo,
    VariantSource,
    install_source,
    installed_build_version,
    register_variant,
    resolve_target,
    variants,
)
from fdl.libtorch.sources import KINDS, occupied
from fdl.paths import Context
from tests.support.libtorch_trees import make_tree


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "root", project=True)


@dataclass
class Fake:
    """A source of one build, counting what it was asked to do."""

    build: str
    replaces: bool = False
    populated: list[Path] = field(default_factory=list)

    kind = "directory"
    default_name = "precompiled/fake"

    def describe(self) -> str:
        return f"libtorch {self.build} from nowhere"

    def is_current(self, path: Path) -> bool:
        return installed_build_version(path) == self.build

    def refusal(self, target: Target) -> UsageError | None:
        if self.replaces:
            return None
        return occupied(target, installed_build_version(target.path) or "?", self.build)

    def populate(self, tree: Path) -> VariantInfo:
        self.populated.append(tree)
        make_tree(tree, self.build)
        return VariantInfo(name="", torch=self.build.split("+")[0], source={"kind": "test"})


def test_the_six_sources_are_the_six_kinds() -> None:
    sources = (FromArchive, FromWheel, FromCpuView, FromRegistry, FromBuild, FromDirectory)
    assert tuple(source.kind for source in sources) == KINDS
    assert len(set(KINDS)) == 6


def test_a_source_installs_to_its_default_name_and_is_activated(context: Context) -> None:
    source: VariantSource = Fake("2.13.0+cpu")
    result = install_source(context, source)
    assert (result.installed, result.activated) == (True, True)
    assert result.target.name == "precompiled/fake"
    assert variants.active_name(context) == "precompiled/fake"
    assert installed_build_version(result.target.path) == "2.13.0+cpu"


def test_a_current_variant_is_kept_unless_forced(context: Context) -> None:
    install_source(context, Fake("2.13.0+cpu"), name="precompiled/mine", activate=False)
    again = Fake("2.13.0+cpu")
    kept = install_source(context, again, name="precompiled/mine")
    assert (kept.installed, kept.activated, again.populated) == (False, True, [])
    forced = install_source(context, again, name="precompiled/mine", force=True)
    assert forced.installed and len(again.populated) == 1


def test_another_build_is_refused_in_the_sources_words_unless_forced(context: Context) -> None:
    install_source(context, Fake("2.12.0+cpu"))
    newer = Fake("2.13.0+cpu")
    with pytest.raises(UsageError) as refused:
        install_source(context, newer)
    assert refused.value.message == (
        "precompiled/fake already holds libtorch 2.12.0+cpu, not 2.13.0+cpu"
    )
    assert newer.populated == []
    replaced = install_source(context, newer, force=True)
    assert (replaced.installed, replaced.replaced) == (True, "2.12.0")


def test_a_source_without_a_refusal_replaces_what_fdl_made(context: Context) -> None:
    install_source(context, Fake("2.12.0+cpu"))
    result = install_source(context, Fake("2.13.0+cpu", replaces=True))
    assert (result.installed, result.replaced) == (True, "2.12.0")


def test_a_resolved_target_is_installed_there(context: Context, tmp_path: Path) -> None:
    target = resolve_target(context, "precompiled/x", tmp_path / "elsewhere")
    result = install_source(context, Fake("2.13.0+cpu"), target=target)
    assert result.target.path == tmp_path / "elsewhere"
    assert (result.installed, result.activated) == (True, False)


def test_describing_the_cpu_view_reads_nothing(tmp_path: Path) -> None:
    # no index is reachable from a unit test: describe() must not look the wheel up
    view = FromCpuView(torch="2.13.0", cache=tmp_path)
    assert view.describe() == (
        "the CPU view of PyPI's torch 2.13.0 wheel: only what a CPU program loads"
    )
    on_index = FromCpuView(torch="2.13.0", index_url="http://127.0.0.1:9/simple")
    assert "torch 2.13.0's wheel on http://127.0.0.1:9/simple" in on_index.describe()
    local = FromCpuView(wheel=tmp_path / "torch-2.13.0-cp311-cp311-linux_x86_64.whl")
    assert local.describe().startswith("the CPU view of torch-2.13.0-cp311")
    assert (view.kind, view.default_name) == ("cpu-view", "precompiled/cpu")


def test_a_build_registers_as_the_build_source(context: Context, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "staging", "2.14.1+cu128")
    info = VariantInfo(
        name="builds/sm61-sm120",
        torch="2.14.1",
        archs_requested=["sm_61", "sm_120"],
        source={"kind": "build", "recipe": "docker"},
    )
    described = FromBuild(tree, info).describe()
    assert described == "libtorch 2.14.1 built from source for sm_61 sm_120 (docker)"
    result = register_variant(context, "builds/sm61-sm120", tree, info)
    assert result.installed and not tree.exists()  # moved, as before
    assert FromDirectory(tmp_path / "t").default_name == "precompiled/t"
