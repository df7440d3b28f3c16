"""Installing a tree: staging, atomic rename, lock, metadata, activation, register_variant."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from fdl.errors import EnvironmentProblem
from fdl.libtorch import VariantInfo, install_tree, register_variant, resolve_target, variants
from fdl.paths import Context
from tests.support.libtorch_trees import make_tree


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "root", project=True)


def populate_with(version: str, **tree: object):
    def populate(staging: Path) -> VariantInfo:
        make_tree(staging, version, **tree)
        return VariantInfo(
            name="", torch=version.split("+", maxsplit=1)[0], source={"kind": "test"}
        )

    return populate


def leftovers(context: Context, kind: str = "precompiled") -> list[str]:
    base = context.libtorch_dir / kind
    return sorted(p.name for p in base.iterdir() if p.name.startswith(".")) if base.is_dir() else []


def test_install_writes_metadata_and_activates(context: Context) -> None:
    target = resolve_target(context, "precompiled/cpu")
    result = install_tree(context, target, populate_with("2.13.0+cpu"))
    assert result.installed and result.activated
    assert variants.active_name(context) == "precompiled/cpu"
    info = variants.read_info(target.path, "precompiled/cpu")
    assert (info.torch, info.abi, info.name) == ("2.13.0", "cxx11", "precompiled/cpu")
    assert info.archs_found == {"cubin": [], "ptx": []}
    assert info.installed_at.endswith("Z")
    assert leftovers(context) == []


def test_failed_populate_leaves_nothing(context: Context) -> None:
    target = resolve_target(context, "precompiled/cpu")

    def broken(staging: Path) -> VariantInfo:
        make_tree(staging)
        raise OSError("disk full")

    with pytest.raises(OSError):
        install_tree(context, target, broken)
    assert not target.path.exists()
    assert leftovers(context) == []
    assert variants.active_name(context) is None


def test_tree_without_libtorch_is_refused(context: Context) -> None:
    target = resolve_target(context, "precompiled/cpu")

    def empty(staging: Path) -> VariantInfo:
        (staging / "include").mkdir(parents=True)
        return VariantInfo(name="")

    with pytest.raises(EnvironmentProblem) as info:
        install_tree(context, target, empty)
    assert "lib/libtorch.so" in info.value.message
    assert not target.path.exists()


def test_replace_keeps_the_old_until_the_new_is_complete(context: Context) -> None:
    target = resolve_target(context, "precompiled/cpu")
    install_tree(context, target, populate_with("2.12.0+cpu"))
    seen: list[str] = []

    def new(staging: Path) -> VariantInfo:
        seen.append((target.path / "build-version").read_text().strip())
        return populate_with("2.13.0+cpu")(staging)

    result = install_tree(context, target, new)
    assert seen == ["2.12.0+cpu"]
    assert result.replaced == "2.12.0"
    assert (target.path / "build-version").read_text() == "2.13.0+cpu\n"
    assert leftovers(context) == []


def test_current_variant_is_not_rewritten(context: Context) -> None:
    target = resolve_target(context, "precompiled/cpu")
    install_tree(context, target, populate_with("2.13.0+cpu"), activate=False)
    stamp = (target.path / "variant.json").stat().st_mtime_ns
    result = install_tree(
        context, target, populate_with("2.13.0+cpu"), is_current=lambda path: True
    )
    assert not result.installed and result.activated
    assert (target.path / "variant.json").stat().st_mtime_ns == stamp


def test_concurrent_installs_are_serialised(context: Context) -> None:
    target = resolve_target(context, "precompiled/cpu")
    inside = []

    def slow(staging: Path) -> VariantInfo:
        inside.append(time.monotonic())
        time.sleep(0.3)
        return populate_with("2.13.0+cpu")(staging)

    results = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                install_tree(
                    context,
                    target,
                    slow,
                    is_current=lambda p: (p / "build-version").read_text() == "2.13.0+cpu\n",
                )
            )
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r.installed for r in results) == [False, True]
    assert len(inside) == 1
    assert leftovers(context) == []


def test_path_outside_the_layout(context: Context, tmp_path: Path) -> None:
    target = resolve_target(context, "precompiled/cpu", tmp_path / "elsewhere" / "lt")
    assert target.name is None
    result = install_tree(context, target, populate_with("2.13.0+cpu"))
    assert result.installed and not result.activated
    assert (tmp_path / "elsewhere/lt/lib/libtorch.so").is_file()
    inside = resolve_target(context, "precompiled/x", context.libtorch_dir / "builds" / "mine")
    assert inside.name == "builds/mine"


def test_register_variant_for_a_source_build(context: Context, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "out", "2.14.1", cubins=[61, 120], cuda_needed=())
    info = VariantInfo(
        name="builds/sm61-sm120",
        torch="2.14.1",
        cuda="12.8",
        archs_requested=["6.1", "12.0"],
        source={"kind": "build", "recipe": "docker"},
    )
    result = register_variant(context, "builds/sm61-sm120", tree, info)
    assert result.activated and not tree.exists()
    stored = variants.read_info(result.target.path, "builds/sm61-sm120")
    assert stored.archs_found["cubin"] == ["sm_61", "sm_120"]
    assert "archs=6.1 12.0\nsource=compiled\n" in (result.target.path / ".arch").read_text()
