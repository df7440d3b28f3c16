"""Questions over the tables: toolkits, official variants, URLs, images, run-time libraries."""

from __future__ import annotations

import pytest

from fdl.compat import (
    Match,
    archive_layout,
    check_driver,
    choose_toolkit,
    choose_variant,
    cmake_policy_env,
    compilable_toolkits,
    cudnn_limit,
    default_torch_version,
    fatbin_compression_flags,
    host_compilers,
    image_tag,
    injected_libraries,
    library_for_soname,
    libtorch_url,
    max_parallel_jobs,
    memory_per_job_gb,
    parse_archs,
    resolve_torch_version,
    runtime_libraries,
    source_requirements,
    toolkit,
    variant_targets,
)
from fdl.errors import UsageError

# -- toolkits ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("archs", "able"),
    [
        ("6.1;12.0", ["12.9", "12.8"]),
        ("7.5;12.0+PTX", ["13.5", "13.4", "13.3", "13.2", "13.1", "13.0", "12.9", "12.8"]),
        (
            "6.1",
            [
                "12.9",
                "12.8",
                "12.6",
                "12.5",
                "12.4",
                "12.3",
                "12.2",
                "12.1",
                "12.0",
                "11.8",
                "11.7",
            ],
        ),
        ("12.1f", ["13.5", "13.4", "13.3", "13.2", "13.1", "13.0", "12.9"]),
        ("10.1", ["12.9", "12.8"]),
        ("11.0", ["13.5", "13.4", "13.3", "13.2", "13.1", "13.0"]),
        ("3.5;12.0", []),
    ],
)
def test_which_toolkits_compile_an_arch_set(archs: str, able: list[str]) -> None:
    assert [t.version for t in compilable_toolkits(parse_archs(archs))] == able


def test_choose_toolkit_prefers_the_newest() -> None:
    assert choose_toolkit(parse_archs("6.1;12.0")).version == "12.9"
    assert choose_toolkit(parse_archs("7.5;12.0+PTX")).version == "13.5"
    assert choose_toolkit(parse_archs("6.1;12.0"), allowed=["12.8", "13.0"]).version == "12.8"


def test_impossible_toolkit_choice_says_why() -> None:
    with pytest.raises(UsageError) as caught:
        choose_toolkit(parse_archs("3.5;12.0"))
    message = caught.value.message
    assert "sm_35 (Kepler): CUDA 11.7 to 11.8 compile it" in message
    assert "sm_120 (Blackwell): CUDA 12.8 and newer compile it" in message


def test_pinned_toolkit_problem_names_the_fix() -> None:
    problems = toolkit("13.0").problems(parse_archs("6.1;12.0"))
    assert problems == ["CUDA 13.0 cannot compile sm_61 (Pascal); CUDA 11.7 to 12.9 compile it"]
    assert toolkit("13.0").problems(parse_archs("10.1")) == [
        "CUDA 13.0 calls sm_101 sm_110: write 11.0"
    ]


@pytest.mark.parametrize("text", ["12.8", "12.8.1", "cu128", "CU128"])
def test_toolkit_lookup_forms(text: str) -> None:
    assert toolkit(text).version == "12.8"


def test_toolkit_major_alone_is_the_newest_of_that_major() -> None:
    assert toolkit("13").version == "13.5"
    with pytest.raises(UsageError, match="unknown CUDA version"):
        toolkit("12.7")


def test_host_compilers_and_deprecation_flag() -> None:
    assert (host_compilers("12.8").gcc, host_compilers("12.8").clang) == (14, 19)
    assert host_compilers("13.0").gcc == 15
    assert host_compilers("11.8").gcc == 11
    kit = toolkit("12.9")
    assert kit.deprecation_warnings(parse_archs("6.1;12.0")) == ["sm_61"]
    assert kit.nvcc_flags(parse_archs("6.1;12.0")) == ["-Wno-deprecated-gpu-targets"]
    assert toolkit("13.0").nvcc_flags(parse_archs("7.5")) == []


def test_driver_floor() -> None:
    assert check_driver("576.88", "12.8").ok
    check = check_driver("576.88", "13.0")
    assert not check.ok and check.required == "580" and "580" in check.reason
    assert check_driver("580.65.06", "13.0").ok
    assert not check_driver("470.1", "12.0").ok


def test_a_gpu_its_driver_predates_is_not_run_whatever_the_toolkit() -> None:
    """Minor-version compatibility lets 525+ run 12.8 code, but no driver before R570
    supports Blackwell."""
    from fdl.compat import parse_capability

    blackwell, pascal = parse_capability("12.0"), parse_capability("6.1")
    assert check_driver("560.35.05", "12.8", gpus=[pascal]).ok
    check = check_driver("560.35.05", "12.8", gpus=[pascal, blackwell])
    assert not check.ok and check.required == "570"
    assert check.reason.startswith("sm_120 (Blackwell) needs driver >= 570")
    assert check_driver("570.26", "12.8", gpus=[blackwell]).ok


def test_ptx_jit_needs_the_toolkits_own_driver() -> None:
    from fdl.compat import ptx_jit_driver

    assert ptx_jit_driver("12.8") == "570.26"  # CUDA 12.8 GA
    assert check_driver("550.54.15", "12.8").ok  # cubins: minor-version compatibility
    check = check_driver("550.54.15", "12.8", ptx=True)
    assert not check.ok and check.required == "570.26" and "PTX JIT" in check.reason


# -- images --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "tag"),
    [
        (("12.8", "cudnn-devel", "24.04"), "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"),
        (("12.6", "cudnn-runtime", "22.04"), "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04"),
        (("13.0", "cudnn-runtime", None), "nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04"),
        (("12.3", "cudnn-devel", "22.04"), "nvidia/cuda:12.3.2-cudnn9-devel-ubuntu22.04"),
        (("12.2", "cudnn-runtime", "22.04"), "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"),
        (("12.8", "base", "20.04"), "nvidia/cuda:12.8.1-base-ubuntu20.04"),
    ],
)
def test_image_tags(args: tuple[str, str, str | None], tag: str) -> None:
    assert image_tag(*args) == tag


def test_image_tag_errors() -> None:
    with pytest.raises(UsageError, match=r"Ubuntu 20\.04"):
        image_tag("13.0", "runtime", "20.04")
    with pytest.raises(UsageError, match="flavour"):
        image_tag("12.8", "slim")


# -- official variants ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "torch", "variant"),
    [
        (["6.1", "12.0"], None, None),
        (["6.0", "7.0"], None, None),  # 2.15 has no CUDA 12.6 build
        (["6.0", "7.0"], "2.14", "cu126"),
        (["6.0", "7.0"], "2.9", "cu126"),
        (["12.0"], None, "cu132"),
        (["12.0"], "2.9", "cu128"),
        (["12.0"], "2.7", "cu128"),
        (["12.1"], None, "cu132"),
        ([], None, "cpu"),
        (["6.1"], "2.7", "cu126"),
        (["3.7", "9.0"], "2.5", "cu118"),
    ],
)
def test_choose_variant(gpus: list[str], torch: str | None, variant: str | None) -> None:
    choice = choose_variant(gpus, torch)
    assert (choice.variant.name if choice.variant else None) == variant
    assert choice.reason


def test_no_official_build_for_pascal_plus_blackwell_says_so() -> None:
    choice = choose_variant(["6.1", "12.0"], "2.14")
    assert not choice.ok
    assert "no official PyTorch 2.14.1 build covers sm_61 and sm_120 together" in choice.reason
    assert choice.build_toolkits == ("12.8", "12.9")
    assert dict(choice.rejected)["cu126"] == "no code for sm_120 (Blackwell)"


def test_dgx_spark_runs_the_compatible_120_cubin() -> None:
    choice = choose_variant(["12.1"])
    assert choice.verdicts[0].match is Match.COMPATIBLE
    assert "sm_120" in choice.reason


def test_observed_binary_has_no_ptx() -> None:
    targets = variant_targets("2.14.1", "cu130")
    assert targets.codes() == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert "compute_120" in variant_targets("2.14.0", "cu130").codes()


def test_old_driver_rejects_cuda_13_builds() -> None:
    choice = choose_variant(["12.0"], driver="575.57")
    assert not choice.ok
    assert "needs driver >= 580" in choice.reason
    assert choice.build_toolkits == ("12.8", "12.9")
    assert choose_variant(["12.0"], "2.10", driver="575.57").variant.name == "cu128"  # type: ignore[union-attr]


def test_torch_versions() -> None:
    assert default_torch_version() == "2.15.0"
    assert resolve_torch_version("2.8") == "2.8.0"
    assert resolve_torch_version("2.8.0+cu128") == "2.8.0"
    assert resolve_torch_version("v2.13.0") == "2.13.0"
    with pytest.raises(UsageError, match="unknown PyTorch version"):
        resolve_torch_version("1.13")
    assert source_requirements("2.8").cmake_min == "3.18"
    assert source_requirements("2.9").cmake_min == "3.27"
    assert source_requirements("2.12").cxx_standard == 17
    assert source_requirements("2.13").cxx_standard == 20
    assert source_requirements("2.9").python_min == "3.10"


# -- libtorch URLs -------------------------------------------------------------------------

BASE = "https://download.pytorch.org/libtorch"


@pytest.mark.parametrize(
    ("args", "kwargs", "url"),
    [
        (
            ("2.7", "cu128"),
            {},
            f"{BASE}/cu128/libtorch-cxx11-abi-shared-with-deps-2.7.1%2Bcu128.zip",
        ),
        (
            ("2.6.0", "cu126"),
            {"abi": "pre-cxx11"},
            f"{BASE}/cu126/libtorch-shared-with-deps-2.6.0%2Bcu126.zip",
        ),
        (("2.8", "cu128"), {}, f"{BASE}/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip"),
        (("2.14.1", "cpu"), {}, f"{BASE}/cpu/libtorch-shared-with-deps-2.14.1%2Bcpu.zip"),
        ((None, "cu130"), {}, f"{BASE}/cu130/libtorch-shared-with-deps-2.15.0%2Bcu130.zip"),
        (
            ("2.15.0", "cu130"),
            {"channel": "test"},
            f"{BASE}/test/cu130/libtorch-shared-with-deps-2.15.0%2Bcu130.zip",
        ),
        (
            (None, "cu130"),
            {"channel": "nightly"},
            f"{BASE}/nightly/cu130/libtorch-shared-with-deps-latest.zip",
        ),
        (
            ("2.8", "cu128"),
            {"base_url": "http://127.0.0.1:8080/mirror/"},
            "http://127.0.0.1:8080/mirror/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip",
        ),
    ],
)
def test_libtorch_urls(args: tuple[str | None, str], kwargs: dict[str, str], url: str) -> None:
    assert libtorch_url(*args, **kwargs) == url


def test_libtorch_url_errors() -> None:
    with pytest.raises(UsageError, match="no official cu128 build"):
        libtorch_url("2.14", "cu128")
    with pytest.raises(UsageError, match="pre-cxx11"):
        libtorch_url("2.8", "cu128", abi="pre-cxx11")
    with pytest.raises(UsageError, match="pre-cxx11"):  # none from 2.7 on
        libtorch_url("2.7.1", "cu126", abi="pre-cxx11")
    with pytest.raises(UsageError, match="channel"):
        libtorch_url("2.8", "cu128", channel="beta")
    with pytest.raises(UsageError, match="CPU only"):
        libtorch_url("2.8", "cu128", platform="macos-arm64")


def test_archive_layout() -> None:
    layout = archive_layout()
    assert (layout.top, layout.version_file, layout.hash_file) == (
        "libtorch",
        "build-version",
        "build-hash",
    )
    assert layout.library == "lib/libtorch.so"


# -- run-time libraries and build knobs ----------------------------------------------------


def test_runtime_libraries_for_a_cuda_13_libtorch() -> None:
    libs = {lib.id: lib for lib in runtime_libraries("cu130")}
    assert set(libs) >= {"cudart", "cublas", "cufft", "curand", "cusparse", "cusolver", "nvjitlink",
                         "nvrtc", "cupti", "cudnn", "nccl", "cusparselt", "cufile", "nvshmem", "zlib"}  # fmt: skip
    assert libs["cublas"].sonames == ("libcublas.so.13", "libcublasLt.so.13")
    assert libs["cublas"].wheel == "nvidia-cublas"
    assert libs["cudnn"].wheel == "nvidia-cudnn-cu13"
    assert libs["nccl"].wheel == "nvidia-nccl-cu13"
    assert "libcudnn_ops.so.9" in libs["cudnn"].dlopened
    assert "cudnn-runtime" in libs["cudnn"].images and "runtime" not in libs["cudnn"].images
    assert libs["cusparselt"].images == ()
    assert libs["cudart"].images == ("base", "cudnn-devel", "cudnn-runtime", "devel", "runtime")
    assert "libcuda.so.1" in injected_libraries()
    assert not any(lib.matches("libcuda.so.1") for lib in libs.values())


def test_switches_drop_runtime_libraries() -> None:
    ids = {lib.id for lib in runtime_libraries("13.0", switches={"USE_KINETO": "0", "USE_CUDNN": "OFF",
                                                                   "USE_DISTRIBUTED": False})}  # fmt: skip
    assert not ids & {"cupti", "cudnn", "zlib", "nccl", "nvshmem"}
    assert "cublas" in ids
    ids = {lib.id for lib in runtime_libraries("13.0", switches={"USE_KINETO": "1"})}
    assert "cupti" in ids


def test_cuda_12_libraries_and_lookup_by_soname() -> None:
    cufft = library_for_soname("libcufft.so.11", "12.8")
    assert cufft is not None and cufft.wheel == "nvidia-cufft-cu12"
    builtins = library_for_soname("libnvrtc-builtins.so.13.0", "13.0")
    assert builtins is not None and builtins.id == "nvrtc"
    with pytest.raises(UsageError):
        runtime_libraries("11.8")


def test_build_knobs() -> None:
    # official 12.8/12.9 builds use -compress-mode=size (.ci/manywheel/build_cuda.sh)
    assert fatbin_compression_flags("12.6") == ["-Xfatbin", "-compress-all"]
    assert fatbin_compression_flags("12.8") == ["-Xfatbin", "-compress-all", "-compress-mode=size"]
    assert fatbin_compression_flags("13.0") == ["-Xfatbin", "-compress-all", "-compress-mode=size"]
    assert memory_per_job_gb(flash_attention=True) == 5.0
    assert memory_per_job_gb(flash_attention=False) < 5.0
    assert max_parallel_jobs(16, 8) == 3
    assert max_parallel_jobs(2, 8) == 1
    assert max_parallel_jobs(64, 2, flash_attention=False) == 2
    limit = cudnn_limit(parse_archs("6.1;12.0"))
    assert limit is not None and limit.max_cudnn == "9.10"
    assert cudnn_limit(parse_archs("7.5;12.0")) is None
    assert cmake_policy_env("4.1.0") == {"CMAKE_POLICY_VERSION_MINIMUM": "3.5"}
    assert cmake_policy_env("3.25.1") == {}


# -- wheel-only CUDA variants ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch", "variant"), [("2.9.1", "cu129"), ("2.10.0", "cu129"), ("2.12.0", "cu128")]
)
def test_wheel_only_variants_are_wheels_not_archives(torch: str, variant: str) -> None:
    from fdl.compat import release, wheel_variant_problem

    rel = release(torch)
    assert variant in [v.name for v in rel.variants_on(form="wheel")]
    assert variant not in [v.name for v in rel.variants_on()]  # the archives
    assert wheel_variant_problem(torch, variant) is None
    with pytest.raises(UsageError) as caught:  # the LibTorch zip does not exist
        libtorch_url(torch, variant)
    assert f"publishes {variant} only as a torch wheel" in caught.value.message
    assert f"--index-url https://download.pytorch.org/whl/{variant}" in str(caught.value.hint)
    # never chosen for an archive download
    assert choose_variant(["12.0"], torch).variant.name != variant  # type: ignore[union-attr]


def test_a_wheel_no_release_publishes_is_named() -> None:
    from fdl.compat import wheel_variant_problem

    assert wheel_variant_problem("2.11.0", "cu129") == (
        "PyTorch 2.11.0 has no cu129 wheel (its wheels: cu126, cu128, cu130, cpu)"
    )
    assert wheel_variant_problem("2.99.0", "cu129") is None  # not in the tables: not refused


def test_ptx_jit_of_a_toolkit_the_tables_lack_a_driver_for_never_falls_below_older_ones() -> None:
    """CUDA 13.0's own driver (580.65.06) refuses 580.0; PTX built by 13.1-13.5 must be
    refused there too (it used to fall back to 13.x's minor-version floor, 580)."""
    from fdl.compat import ptx_jit_floor

    for cuda in ("13.1", "13.2", "13.3", "13.4", "13.5"):
        check = check_driver("580.10", cuda, ptx=True)
        assert not check.ok, cuda
        assert check_driver("580.10", cuda).ok, cuda  # cubins: minor-version compatibility
    floor = ptx_jit_floor("13.4")
    assert floor is not None and floor.toolkit == "13.1" and not floor.verified
    check = check_driver("585.1", "13.4", ptx=True)
    assert not check.ok and check.required == floor.driver
    assert "not in fdl's tables" in check.reason and "CUDA 13.1's" in check.reason
    assert check_driver(floor.driver, "13.4", ptx=True).ok
