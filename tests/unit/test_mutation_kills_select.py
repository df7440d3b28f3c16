"""Variant selection's answers that the mutation run of ``fdl/libtorch/_select.py`` found
untested: the CUDA build ``fdl init`` targets for a machine's GPUs, the ROCm build for AMD
GPUs, what an installed wheel misses, and the keys of a selection's ``--json``."""

from __future__ import annotations

import pytest

from fdl.compat import default_torch_version, parse_capability, release, resolve_torch_version
from fdl.compat.rocm import rocm_builds
from fdl.errors import UsageError
from fdl.libtorch import (
    coverage_fix,
    cuda_target,
    installed_coverage,
    select_rocm,
    select_variant,
)


def caps(*texts: str):
    return [parse_capability(t) for t in texts]


def _default_cuda(torch: str) -> str:
    return next(str(v.cuda) for v in release(torch).variants if v.default and v.cuda)


# --- cuda_target: the CUDA libtorch a project's CUDA commands use -------------------------


@pytest.mark.parametrize("torch", [None, "2.14"])
def test_no_gpus_get_pypis_default_cuda_build_of_that_torch(torch) -> None:
    full = resolve_torch_version(torch)
    cuda = _default_cuda(full)
    target = cuda_target([], torch)
    assert target.cuda == cuda
    assert target.variant == f"precompiled/cu{cuda.replace('.', '')}"
    assert target.cudnn is True
    assert target.command == ("fdl", "libtorch", "download", "--cuda", cuda, "--torch", full)
    assert "no GPU was named or detected" in target.why
    assert f"torch {full}" in target.why and f"CUDA {cuda}" in target.why


def test_gpus_an_official_build_covers_get_that_download() -> None:
    full = default_torch_version()
    selection = select_variant(caps("12.0"))
    target = cuda_target(caps("12.0"))
    assert target.variant == f"precompiled/{selection.variant}"
    assert target.cuda == selection.cuda
    assert target.cudnn is True
    assert target.why == selection.reason
    assert target.command == (
        "fdl", "libtorch", "download", "--cuda", str(selection.cuda), "--torch", full,
    )  # fmt: skip


def test_a_pinned_torch_is_the_release_whose_build_is_chosen() -> None:
    # 2.14.1 has cu126, whose sm_60 cubin runs on Pascal; 2.15 has no build for it
    target = cuda_target(caps("6.1"), "2.14")
    assert (target.variant, target.cuda) == ("precompiled/cu126", "12.6")
    assert target.command[-2:] == ("--torch", "2.14.1")


@pytest.mark.parametrize("torch", [None, "2.14"])
def test_gpus_no_official_build_covers_get_a_source_build(torch) -> None:
    full = resolve_torch_version(torch)
    selection = select_variant(caps("6.1", "12.0"), torch=full)
    target = cuda_target(caps("12.0", "6.1"), torch)
    assert target.variant == "builds/sm61-sm120"
    assert target.cuda == selection.build_cuda is not None
    assert target.cudnn is True
    assert target.why == selection.reason
    # the build is pinned to the release asked for, once
    assert target.command == (
        "fdl", "libtorch", "build", "--archs", "6.1,12.0", "--torch", full,
    )  # fmt: skip


def test_a_driver_below_the_gpus_floor_targets_a_build_that_driver_floor_runs() -> None:
    target = cuda_target(caps("12.0"), driver="550.54")
    assert target.variant == "builds/sm120"
    assert "driver >= 570" in target.why
    assert target.command[:5] == ("fdl", "libtorch", "build", "--archs", "12.0")


def test_gpus_no_build_of_the_release_can_serve_name_the_release_that_can() -> None:
    with pytest.raises(UsageError) as raised:
        cuda_target(caps("3.5"))
    full = default_torch_version()
    assert str(raised.value) == (
        f"torch {full} has no CUDA build for sm_35 and cannot be built for them"
    )
    hint = raised.value.hint or ""
    assert "can: fdl libtorch build --archs 3.5 --torch" in hint


# --- select_rocm: the official ROCm build for AMD GPUs ------------------------------------


def test_rocm_without_torch_is_the_newest_release_with_rocm_builds() -> None:
    newest = max((b.torch for b in rocm_builds()), key=lambda v: tuple(map(int, v.split("."))))
    build = next(b for b in rocm_builds() if b.torch == newest and b.rocm == "7.0")
    selection = select_rocm(None, "7.0")
    assert (selection.torch_version, selection.variant) == (newest, build.name)
    assert selection.cuda is None
    assert selection.rocm == "7.0"
    assert selection.how == "requested"
    assert selection.reason == f"requested (--rocm 7.0): AMD GPUs {' '.join(build.gfx)}"
    assert selection.warnings == ()
    assert selection.build_version == f"{newest}+{build.name}"


def test_rocm_of_a_named_release() -> None:
    build = next(b for b in rocm_builds() if b.rocm == "7.1")
    selection = select_rocm(build.torch.rsplit(".", 1)[0], "7.1")
    assert (selection.torch_version, selection.variant, selection.rocm) == (
        build.torch, build.name, "7.1",
    )  # fmt: skip


@pytest.mark.parametrize(("torch", "rocm"), [("2.14", "7.0"), (None, "6.9"), ("2.99", "7.0")])
def test_a_rocm_build_the_tables_do_not_have_is_a_usage_error(torch, rocm) -> None:
    with pytest.raises(UsageError):
        select_rocm(torch, rocm)


@pytest.mark.parametrize(
    ("glibc", "warns"),
    [
        ("2.17", True),
        ("2.9", True),
        ("2.34", True),
        ("2.35", False),
        ("2.40", False),
        (None, False),
    ],
)
def test_rocm_warns_when_this_machines_glibc_is_older_than_the_builds(glibc, warns) -> None:
    build = next(b for b in rocm_builds() if b.rocm == "7.0")
    assert build.glibc == "2.35"
    warnings = select_rocm(build.torch, "7.0", glibc=glibc).warnings
    if not warns:
        assert warnings == ()
        return
    assert warnings == (
        f"this machine's glibc {glibc} is older than the 2.35 that torch "
        f"{build.torch}+{build.name}'s libraries need: they will not load here",
    )


def test_a_rocm_build_with_no_known_glibc_floor_never_warns() -> None:
    build = next(b for b in rocm_builds() if b.glibc is None)
    assert select_rocm(build.torch, build.rocm, glibc="2.17").warnings == ()


# --- installed_coverage: what an installed CUDA variant misses -----------------------------


def test_an_installed_variant_missing_a_gpu_says_so_and_names_the_download_that_fixes_it() -> None:
    found = installed_coverage(
        "cu132", "13.2", {"cubin": ["sm_80", "sm_90"], "ptx": []}, caps("6.1", "8.6")
    )
    assert found == (
        "cu132 has no code for sm_61: those GPUs cannot run it",
        "fdl libtorch download --cuda 12.6",
    )


def test_the_fix_keeps_a_pinned_torch() -> None:
    found = installed_coverage("cu132", "13.2", {"cubin": ["sm_80"]}, caps("6.1"), torch="2.14.1")
    assert found is not None
    assert found[1] == "fdl libtorch download --cuda 12.6 --torch 2.14.1"


def test_every_missed_gpu_is_named_and_the_fix_is_a_build_when_no_download_covers_them() -> None:
    found = installed_coverage("w", "13.2", {"cubin": ["sm_80", "sm_90"]}, caps("6.1", "12.0"))
    assert found == (
        "w has no code for sm_61, sm_120: those GPUs cannot run it",
        "fdl libtorch build --archs 6.1,12.0",
    )


def test_ptx_counts_as_code_for_newer_gpus() -> None:
    archs = {"cubin": ["sm_80"], "ptx": ["compute_90"]}
    assert installed_coverage("cu132", "13.2", archs, caps("8.6", "12.0")) is None
    # without the PTX, the Blackwell GPU is missed
    found = installed_coverage("cu132", "13.2", {"cubin": ["sm_80"]}, caps("8.6", "12.0"))
    assert found is not None and found[0].startswith("cu132 has no code for sm_120:")


def test_only_ptx_is_still_code() -> None:
    assert installed_coverage("x", "13.2", {"ptx": ["compute_50"]}, caps("8.6")) is None
    assert installed_coverage("x", "13.2", {"ptx": ["compute_90"]}, caps("8.6")) is not None


@pytest.mark.parametrize(
    ("cuda", "archs", "gpus"),
    [
        (None, {"cubin": ["sm_80"]}, ("6.1",)),  # a CPU build: its plan says so
        ("13.2", {"cubin": ["sm_80"]}, ()),  # no GPUs
        ("13.2", {"cubin": [], "ptx": []}, ("6.1",)),  # nothing known of its binaries
        ("13.2", {}, ("6.1",)),
    ],
)
def test_nothing_to_say_without_a_cuda_build_gpus_or_known_code(cuda, archs, gpus) -> None:
    assert installed_coverage("v", cuda, archs, caps(*gpus)) is None


# --- Selection.to_json: the keys of --json -------------------------------------------------


def test_json_of_a_partial_cuda_selection() -> None:
    selection = select_variant(caps("12.0", "6.1"))
    assert selection.to_json() == {
        "torch": selection.torch_version,
        "variant": selection.variant,
        "cuda": selection.cuda,
        "how": "detected",
        "reason": selection.reason,
        "gpus": ["6.1", "12.0"],
        "covers_all_gpus": False,
        "uncovered": ["sm_61"],
        "verdicts": [
            {"gpu": "sm_61", "match": "none", "reason": selection.verdicts[0].reason},
            {"gpu": "sm_120", "match": "native", "reason": "native cubin sm_120"},
        ],
        "warnings": list(selection.warnings),
        "build_command": "fdl libtorch build --archs 6.1,12.0",
        "build_cuda": selection.build_cuda,
        "driver_problem": None,
        "rocm": None,
        "vendor": "nvidia",
    }
    assert selection.variant.startswith("cu") and selection.cuda
    assert selection.build_cuda and len(selection.warnings) == 2


def test_json_of_the_cpu_build_on_a_gpu_machine() -> None:
    data = select_variant(caps("8.6"), cpu=True).to_json()
    assert data["variant"] == "cpu" and data["cuda"] is None
    assert data["vendor"] == "cpu"
    assert (data["how"], data["reason"]) == ("requested", "--cpu was given")
    assert data["gpus"] == ["8.6"]
    assert data["covers_all_gpus"] is False and data["uncovered"] == ["sm_86"]
    assert data["verdicts"] == []
    assert data["build_command"] == "fdl libtorch build --archs 8.6"
    assert data["warnings"][0] == "the CPU build does not use the GPUs (sm_86)"


def test_json_of_a_rocm_build() -> None:
    data = select_rocm(None, "7.1").to_json()
    assert (data["vendor"], data["rocm"], data["cuda"]) == ("amd", "7.1", None)
    assert data["gpus"] == [] and data["covers_all_gpus"] is True
    assert data["build_command"] is None and data["build_cuda"] is None


def test_json_of_a_driver_too_old_for_the_gpu() -> None:
    data = select_variant(caps("12.0"), driver="550.54").to_json()
    assert data["driver_problem"] is not None
    assert "driver >= 570" in data["driver_problem"]
    assert data["warnings"][0] == data["driver_problem"]


# --- what the second mutation run found untested --------------------------------------------


def test_a_detected_build_that_covers_every_gpu_says_how_each_runs_it() -> None:
    data = select_variant(caps("12.0")).to_json()
    assert data["reason"] == "cu132 runs on every GPU (sm_120: native cubin sm_120)"
    assert data["verdicts"] == [
        {"gpu": "sm_120", "match": "native", "reason": "native cubin sm_120"}
    ]


def test_gpus_no_cuda_build_serves_get_the_cpu_build_detected() -> None:
    selection = select_variant(caps("3.5"))
    assert (selection.variant, selection.how) == ("cpu", "detected")
    assert selection.reason.startswith(
        f"no official PyTorch {default_torch_version()} build covers sm_35 ("
    )
    assert selection.warnings == (
        "the CPU build does not use the GPUs (sm_35)",
        f"torch {default_torch_version()} cannot be built for every GPU; torch 2.7.1 can: "
        "fdl libtorch build --archs 3.5 --torch 2.7.1",
    )


def test_a_partial_build_names_every_gpu_it_runs_on() -> None:
    selection = select_variant(caps("6.1", "8.6", "12.0"))
    assert selection.reason.endswith(f"{selection.variant} runs on sm_86, sm_120 only")


def test_the_partial_build_is_the_one_serving_most_gpus() -> None:
    # 2.14.1: cu126 runs on sm_61 and sm_70, cu130 and cu132 on sm_120 only
    selection = select_variant(caps("6.1", "7.0", "12.0"), torch="2.14")
    assert selection.variant == "cu126"
    assert [c.sm for c in selection.uncovered] == ["sm_120"]


def test_among_partial_builds_serving_as_many_pypis_default_wins() -> None:
    # 2.14.1 ships cu126 (sm_61), cu130 (its default) and cu132 (both sm_120)
    assert select_variant(caps("6.1", "12.0"), torch="2.14").variant == "cu130"


def test_a_build_serving_none_of_the_gpus_does_not_end_the_search() -> None:
    # 2.14.1's cu126 serves neither sm_35 nor sm_120; cu130 serves sm_120
    selection = select_variant(caps("3.5", "12.0"), torch="2.14")
    assert selection.variant == "cu130"
    assert [c.sm for c in selection.uncovered] == ["sm_35"]


def test_a_requested_cuda_says_which_flag_chose_it() -> None:
    assert select_variant(caps("8.6"), cuda="13.0").reason == "--cuda 13.0 was given"


def test_a_requested_variant_is_taken_from_the_pinned_release() -> None:
    selection = select_variant(caps("8.6"), cuda="12.6", torch="2.14")
    assert (selection.torch_version, selection.variant) == ("2.14.1", "cu126")


def test_a_requested_cuda_the_driver_cannot_run_warns() -> None:
    selection = select_variant(caps("8.6"), cuda="13.0", driver="550.54")
    assert selection.warnings == (
        "CUDA 13.0 needs driver >= 580, this one is 550.54: update the NVIDIA driver",
    )


def test_cubins_need_only_the_minor_version_floor_of_the_driver() -> None:
    # cu126 runs sm_86 natively: driver 530 (above 12.x's 525 floor) runs it
    assert select_variant(caps("8.6"), cuda="12.6", torch="2.14", driver="530.30").warnings == ()


def test_a_driver_below_the_gpus_floor_is_said_once_first() -> None:
    selection = select_variant(caps("6.1", "12.0"), driver="550.54")
    assert selection.warnings == (
        "sm_120 (Blackwell) needs driver >= 570 (no older driver supports it), this one is "
        "550.54: upgrade the NVIDIA driver to 570 or newer (no libtorch, of any CUDA, runs on "
        "that GPU with an older driver)",
        "the CPU build does not use the GPUs (sm_61, sm_120)",
        "for every GPU, build libtorch from source: fdl libtorch build --archs 6.1,12.0 "
        f"(torch {default_torch_version()}, CUDA 12.9)",
    )
    # the build was chosen for driver 570; what 570 lacks is not this machine's warning
    requested = select_variant(caps("12.0"), cuda="13.0", driver="550.54")
    assert requested.warnings == (requested.driver_problem,)
    assert "this one is 550.54" in str(requested.driver_problem)


def test_every_gpu_a_build_misses_is_named() -> None:
    selection = select_variant(caps("3.5", "6.1"), cuda="13.0")
    assert selection.warnings[0] == "cu130 has no code for sm_35, sm_61"


def test_the_cpu_build_names_the_gpus_and_the_downloads_that_would_use_them() -> None:
    full = default_torch_version()
    build = f"fdl libtorch build --archs 6.1,7.5 (torch {full}, CUDA 12.9)"
    assert select_variant(caps("6.1", "7.5"), cpu=True).warnings == (
        "the CPU build does not use the GPUs (sm_61, sm_75)",
        f"for every GPU, build libtorch from source: {build}",
        "or, without a build: torch 2.14.1's official cu126 build runs on sm_61, sm_75 "
        "(fdl libtorch download --torch 2.14.1)",
    )
    # a driver older than cu126's (525) runs 2.7.1's cu118
    older = select_variant(caps("6.1", "7.5"), cpu=True, driver="520.61").warnings
    assert older[-1].startswith("or, without a build: torch 2.7.1's official cu118 build")
    # Linux arm64 has no official build of an older release for them
    arm = select_variant(caps("6.1", "7.5"), cpu=True, platform="linux-arm64").warnings
    assert arm == (
        "the CPU build does not use the GPUs (sm_61, sm_75)",
        f"for every GPU, build libtorch from source: {build}",
    )


def test_a_pinned_release_is_kept_in_the_build_and_its_cuda() -> None:
    selection = select_variant(caps("6.1", "12.0"), torch="2.7")
    assert selection.build == (
        "fdl", "libtorch", "build", "--archs", "6.1,12.0", "--torch", "2.7.1",
    )  # fmt: skip
    assert selection.build_cuda == "12.8"  # 2.7.1's newest release CUDA


def test_a_release_too_old_for_the_gpu_names_the_first_that_covers_it() -> None:
    x86 = select_variant(caps("12.0"), torch="2.6").warnings
    assert x86[-1] == (
        "torch 2.6.0 cannot be built for sm_120: use torch 2.7.1 or newer, whose cu128 build "
        "covers them (fdl libtorch download --torch 2.7.1)"
    )
    # an Ada GPU beside it: 2.6 cannot build the two together
    pair = select_variant(caps("8.9", "12.0"), torch="2.6").warnings
    assert pair[-1].startswith("torch 2.6.0 cannot be built for sm_89, sm_120: use torch 2.7.1")
    arm = select_variant(caps("12.0"), torch="2.6", platform="linux-arm64").warnings
    assert arm[-1] == (
        "torch 2.6.0 cannot be built for sm_120: use torch 2.11.0 or newer, whose cu130 build "
        "covers them (fdl libtorch install --from-wheel --torch 2.11.0)"
    )


def test_coverage_fix_is_a_download_an_official_build_covers_else_a_build() -> None:
    assert coverage_fix([]) == "fdl libtorch download --cpu"
    assert coverage_fix(caps("6.1", "12.0"), torch="2.14") == (
        "fdl libtorch build --archs 6.1,12.0 --torch 2.14.1"
    )
    # driver 570 runs no 2.15 build: 2.11.0's cu128 is the newest that driver runs
    assert coverage_fix(caps("12.0"), driver="570.86") == "fdl libtorch download --cuda 12.8"
    # a torch the tables do not know: the newest that fits, for this driver still
    assert coverage_fix(caps("12.0"), torch="9.9", driver="570.86") == (
        "fdl libtorch download --cuda 12.8 --torch 2.11.0"
    )


def test_installed_coverage_fix_is_for_this_driver() -> None:
    found = installed_coverage("cu132", "13.2", {"cubin": ["sm_80"]}, caps("12.0"), driver="570.86")
    assert found == (
        "cu132 has no code for sm_120: those GPUs cannot run it",
        "fdl libtorch download --cuda 12.8",
    )


def test_no_release_serving_all_the_gpus_asks_for_other_gpus_or_torch() -> None:
    with pytest.raises(UsageError) as raised:
        cuda_target(caps("3.5", "12.0"))
    assert str(raised.value) == (
        f"torch {default_torch_version()} has no CUDA build for sm_35 + sm_120 and cannot be "
        "built for them"
    )
    assert raised.value.hint == "name other --gpus, or pick another --torch"


def test_a_release_too_old_to_build_for_the_gpus_names_the_newer_one() -> None:
    with pytest.raises(UsageError) as raised:
        cuda_target(caps("12.0"), "2.6")
    assert raised.value.hint == (
        "torch 2.6.0 cannot be built for sm_120: use torch 2.7.1 or newer, whose cu128 build "
        "covers them (fdl libtorch download --torch 2.7.1)"
    )


def test_the_advice_beside_a_partial_build_is_for_this_driver() -> None:
    # 2.14.1's cu126 runs sm_75 only; driver 570 runs CUDA 12.x, not 13
    selection = select_variant(caps("7.5", "12.0"), torch="2.14", driver="570.86")
    assert selection.variant == "cu126"
    assert selection.build_cuda == "12.9"
    assert selection.warnings[1:] == (
        "for every GPU, build libtorch from source: fdl libtorch build --archs 7.5,12.0 "
        "--torch 2.14.1 (torch 2.14.1, CUDA 12.9)",
        "or, without a build: torch 2.11.0's official cu128 build runs on sm_75, sm_120 "
        "(fdl libtorch download --torch 2.11.0)",
    )


def test_a_newer_release_is_named_only_when_this_driver_runs_its_build() -> None:
    # Linux arm64's first build for sm_120 is 2.11.0's cu130, which needs driver 580
    selection = select_variant(caps("12.0"), torch="2.6", platform="linux-arm64", driver="570.86")
    assert selection.warnings[-1] == (
        "torch 2.6.0 cannot be built for every GPU; torch 2.15.0 can: "
        "fdl libtorch build --archs 12.0 --torch 2.15.0"
    )
