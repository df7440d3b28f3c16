"""Parts of the source build: status lines, recipes, compiler cache settings, request layers."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import ManifestError, UsageError
from fdl.libtorch.build import BuildRequest, Setting, StatusParser, build_request, compiled_objects
from fdl.libtorch.build._cache import CacheStats, _ccache_stats, _sccache_stats, plan_cache
from fdl.libtorch.recipes import find_recipe, list_recipes, load_recipe
from fdl.manifest import load_manifest


@pytest.mark.parametrize(
    ("line", "text", "fraction"),
    [
        (
            "[12/40] Building CXX object c10/CMakeFiles/c10.dir/core/Device.cpp.o",
            "[12/40] compiling Device.cpp (CXX)",
            0.3,
        ),
        (
            "#14 52.1 [3/6] Building CUDA object x/flash_fwd.cu.o",
            "[3/6] compiling flash_fwd.cu (CUDA)",
            0.5,
        ),
        ("[ 42%] Building CXX object a/b.cpp.o", "compiling b.cpp (CXX)", 0.42),
        (
            "[100%] Linking CXX shared library lib/libtorch.so",
            "Linking CXX shared library lib/libtorch.so",
            1.0,
        ),
        ("-- Configuring done", "configured", None),
        ("Cloning into '/x/pytorch'...", "cloning the source", None),
    ],
)
def test_status_lines(line: str, text: str, fraction: float | None) -> None:
    status = StatusParser().feed(line)
    assert status is not None
    assert status.text() == text
    assert (
        status.fraction == pytest.approx(fraction)
        if fraction is not None
        else status.fraction is None
    )


def test_other_lines_keep_the_status() -> None:
    parser = StatusParser()
    parser.feed("[1/2] Building CXX object a.cpp.o")
    assert parser.feed("warning: unused variable") is None
    assert parser.status is not None and parser.status.done == 1


def test_compiled_objects_from_a_log() -> None:
    lines = [
        "[1/3] Building CXX object c10/a.cpp.o",
        "x",
        "#5 1.0 [2/3] Building CUDA object k.cu.o",
    ]
    assert compiled_objects(lines) == ["c10/a.cpp.o", "k.cu.o"]


def test_builtin_recipes_load_and_validate(tmp_path: Path) -> None:
    recipes = {r.name: r for r in list_recipes()}
    assert {"pascal-blackwell", "blackwell", "cpu", "turing-blackwell"} <= set(recipes)
    assert recipes["pascal-blackwell"].builtin
    request = build_request(None, {"recipe": ("pascal-blackwell", "--recipe")}, tmp_path)
    assert request.value("archs") == "6.1;12.0"
    # torch and CUDA follow the project and the machine (one answer with fdl setup); what
    # the framework needs stays on: flash attention (sm_120 runs it) and NCCL (floDl's DDP).
    assert request.value("cuda") is None and request.value("torch") is None
    assert request.value("flash_attention") is None
    assert "USE_DISTRIBUTED" not in request.switches and "USE_NCCL" not in request.switches
    assert request.switches["BUILD_TEST"].value == "0"
    assert request.archs is not None and request.archs.location is not None
    assert request.archs.origin.startswith("recipe pascal-blackwell:")
    assert request.archs.origin.endswith(" (archs)")
    assert request.recipe is not None and request.recipe.origin == "--recipe"


def test_project_recipe_wins_and_errors_point_at_the_line(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "blackwell.yml").write_text('description: ours\narchs: "12.0"\n')
    recipe = load_recipe(find_recipe("blackwell", tmp_path))
    assert recipe.description == "ours" and not recipe.builtin
    bad = tmp_path / "recipes" / "bad.yml"
    bad.write_text("description: x\narchs: '12.0'\nswitchs: {USE_CUDNN: 0}\n")
    with pytest.raises(ManifestError) as caught:
        load_recipe(bad)
    assert caught.value.location is not None and caught.value.location.line == 3
    assert "did you mean 'switches'" in (caught.value.hint or "")


def test_unknown_recipe_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        find_recipe("pascal-blackwel")
    assert "pascal-blackwell" in (caught.value.hint or "")


def test_layers_merge_key_by_key(tmp_path: Path) -> None:
    """Recipe < fdl.yml (and its overlay) < the command line, key by key, each value with
    the origin the manifest engine gave it."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "mine.yml").write_text(
        "description: ours\narchs: '6.1;12.0'\ncuda: '12.8'\n"
        "switches:\n  USE_CUDNN: 0\n  BUILD_TEST: 0\n"
    )
    (tmp_path / "fdl.yml").write_text(
        "libtorch:\n  build:\n    recipe: mine\n    cuda: '12.9'\n"
        "    switches:\n      USE_CUDNN: 1\n"
    )
    (tmp_path / "fdl.ci.yml").write_text("libtorch:\n  build:\n    archs: '12.0'\n")
    manifest = load_manifest(tmp_path, env="ci")
    merged = build_request(manifest, {"jobs": (2, "--jobs")}, tmp_path)
    assert merged.value("archs") == "12.0" and merged.value("cuda") == "12.9"
    assert merged.archs is not None and merged.archs.origin.startswith("fdl.ci.yml:3:")
    assert merged.switches["USE_CUDNN"].origin.startswith("fdl.yml:6:")
    assert merged.switches["BUILD_TEST"].origin.startswith("recipes/mine.yml:6:")
    assert merged.value("jobs") == 2 and merged.jobs is not None
    assert merged.jobs.origin == "--jobs"
    # a recipe named on the command line replaces the manifest's
    other = build_request(manifest, {"recipe": ("pascal-blackwell", "--recipe")}, tmp_path)
    assert other.switches["BUILD_TEST"].origin.startswith("recipe pascal-blackwell:")
    with pytest.raises(UsageError, match="--recipe: unknown build recipe 'nope'"):
        build_request(manifest, {"recipe": ("nope", "--recipe")}, tmp_path)


def test_ccache_plan_sets_the_launchers() -> None:
    plan = plan_cache(
        "ccache", program="/usr/bin/ccache", directory="/c", settings={}, environ={}, cuda=True
    )
    assert plan.env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "/usr/bin/ccache"
    assert plan.env["CCACHE_DIR"] == "/c" and plan.env["USE_CCACHE"] == "0"
    cpu = plan_cache(
        "ccache", program="/usr/bin/ccache", directory="/c", settings={}, environ={}, cuda=False
    )
    assert "CMAKE_CUDA_COMPILER_LAUNCHER" not in cpu.env


def test_missing_cache_program_means_no_cache() -> None:
    plan = plan_cache("sccache", program=None, directory="/c", settings={}, environ={}, cuda=True)
    found = plan_cache(
        "sccache", program="/usr/bin/sccache", directory="/c", settings={}, environ={}, cuda=True
    )
    assert found.enabled and found.env["CMAKE_CXX_COMPILER_LAUNCHER"] == "/usr/bin/sccache"
    assert not plan.enabled and "CMAKE_CXX_COMPILER_LAUNCHER" not in plan.env


def test_sccache_remote_backend_replaces_the_local_dir() -> None:
    plan = plan_cache(
        "sccache",
        program="sccache",
        directory="/c",
        settings={"SCCACHE_GCS_BUCKET": "b"},
        environ={"SCCACHE_GCS_RW_MODE": "READ_WRITE", "CCACHE_DIR": "/ignored"},
        cuda=False,
    )
    assert plan.remote == "gcs b" and plan.directory is None and "SCCACHE_DIR" not in plan.env
    assert plan.env["SCCACHE_GCS_RW_MODE"] == "READ_WRITE" and "CCACHE_DIR" not in plan.env


def test_cache_statistics_parsers() -> None:
    sccache = '{"stats": {"compile_requests": 9, "cache_hits": {"counts": {"C/C++": 5, "CUDA": 2}}, "cache_misses": {"counts": {"C/C++": 1}}}}'
    assert _sccache_stats(sccache) == CacheStats(7, 1, "9 compile requests")
    assert (
        _ccache_stats("direct_cache_hit\t3\npreprocessed_cache_hit\t1\ncache_miss\t2\n").hits == 4
    )
    assert _sccache_stats("not json").hits is None
    assert CacheStats(3, 1).summary() == "3 hits, 1 misses (75% hits)"


def _tree(tmp_path: Path, entries: list) -> Path:
    from fdl.binaries.synthetic import build_elf, build_fatbin

    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "libtorch.so").write_bytes(build_elf())
    fatbin = build_fatbin([entries])
    (tree / "lib" / "libtorch_cuda.so").write_bytes(build_elf({".nv_fatbin": fatbin}))
    return tree


def test_verification_reads_the_fatbins(tmp_path: Path) -> None:
    from dataclasses import replace as copy

    from fdl.binaries.synthetic import FakeEntry
    from fdl.compat import toolkit
    from fdl.libtorch.build import MachineFacts, Nvcc, VerificationFailed, plan_build
    from fdl.libtorch.build._finish import verify

    facts = MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=Nvcc(
            "13.0",
            "13.0.88",
            "/usr/local/cuda/bin/nvcc",
            toolkit("13.0").targets,
            "/usr/local/cuda",
        ),
        tools={"gcc": "12.2.0", "cmake": "3.28.0", "python3": "3.11.2", "git": "2", "ninja": "1"},
        cores=2,
        ram_gb=16,
        disk_free_gb=100,
    )
    plan = plan_build(
        BuildRequest(archs=Setting("7.5;12.0", "--archs"), backend=Setting("native", "--native")),
        facts,
    )
    good = _tree(tmp_path / "a", [FakeEntry("cubin", 75), FakeEntry("cubin", 120)])
    found, libraries = verify(plan, good)
    assert found.codes() == ["sm_75", "sm_120"] and "libtorch_cuda.so" in libraries
    bad = _tree(tmp_path / "b", [FakeEntry("cubin", 75)])
    with pytest.raises(VerificationFailed) as caught:
        verify(plan, bad)
    assert "lack sm_120" in caught.value.message and caught.value.exit_code == 1
    (good / "lib" / "libtorch.so").unlink()
    with pytest.raises(VerificationFailed):
        verify(copy(plan), good)
