"""The build planner, table-driven: machine facts and a request in, a plan or a refusal out.

No tool runs here: the facts are written by hand (a machine with nvcc 13.0, gcc 12, ...).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fdl.compat import parse_archs, toolkit
from fdl.errors import EnvironmentProblem, Location, ManifestError, UsageError
from fdl.libtorch.build import (
    BuildRequest,
    MachineFacts,
    Nvcc,
    Setting,
    plan_build,
    probe_source,
)

NVCC13 = Nvcc(
    "13.0", "13.0.88", "/usr/local/cuda/bin/nvcc", toolkit("13.0").targets, "/usr/local/cuda"
)
NVCC128 = Nvcc(
    "12.8", "12.8.93", "/opt/cuda-12.8/bin/nvcc", toolkit("12.8").targets, "/opt/cuda-12.8"
)
TOOLS = {
    "gcc": "12.2.0",
    "g++": "12.2.0",
    "cmake": "3.28.3",
    "python3": "3.11.2",
    "git": "2.39.5",
    "ninja": "1.11.1",
    "ccache": "4.7.5",
}


@pytest.fixture
def facts(tmp_path: Path) -> MachineFacts:
    return MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=NVCC13,
        nvcc_reason=None,
        tools=TOOLS,
        tool_paths={"python3": "/usr/bin/python3", "ccache": "/usr/bin/ccache"},
        docker="buildkit",
        docker_reason=None,
        cores=8,
        ram_gb=64.0,
        disk_free_gb=200.0,
    )


def cli(**values: object) -> BuildRequest:
    flags = {"backend": "--docker"}
    return BuildRequest(
        **{k: Setting(v, flags.get(k, f"--{k}")) for k, v in values.items()}  # type: ignore[arg-type]
    )


# (archs, backend, cuda asked) -> (CUDA chosen, TORCH_CUDA_ARCH_LIST, variant)
PLANS = [
    ("6.1;12.0", "docker", None, "12.9", "6.1;12.0", "builds/sm61-sm120"),
    ("sm_61,sm_120", "docker", "12.8", "12.8", "6.1;12.0", "builds/sm61-sm120"),
    ("61 120", "auto", None, "12.9", "6.1;12.0", "builds/sm61-sm120"),
    ("12.0", "native", None, "13.0", "12.0", "builds/sm120"),
    ("12.0", "docker", None, "13.2", "12.0", "builds/sm120"),
    ("7.5,12.0+PTX", "native", None, "13.0", "7.5;12.0+PTX", "builds/sm75-sm120-ptx120"),
    ("Pascal", "docker", None, "12.9", "6.0;6.1", "builds/sm60-sm61"),
    ("12.0a", "native", None, "13.0", "12.0a", "builds/sm120a"),
]


@pytest.mark.parametrize(("archs", "backend", "cuda", "chosen", "arch_list", "variant"), PLANS)
def test_plans(
    facts: MachineFacts,
    archs: str,
    backend: str,
    cuda: str | None,
    chosen: str,
    arch_list: str,
    variant: str,
) -> None:
    values: dict[str, object] = {"archs": archs, "backend": backend}
    if cuda:
        values["cuda"] = cuda
    plan = plan_build(cli(**values), facts)
    assert plan.cuda == chosen
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == arch_list
    assert plan.variant == variant
    assert plan.env["USE_CUDA"] == "1"
    # PyTorch's CMake adds -Xfatbin -compress-all and -Wno-deprecated-gpu-targets itself
    assert plan.env["TORCH_NVCC_FLAGS"] == "-compress-mode=size"


def test_pascal_blackwell_in_docker_pins_a_gcc_cuda_accepts(facts: MachineFacts) -> None:
    plan = plan_build(cli(archs="6.1;12.0", backend="docker", cuda="12.8"), facts)
    assert plan.backend == "docker" and plan.docker is not None
    assert plan.docker.base_image == "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"
    dockerfile = plan.docker.dockerfile
    assert "FDL_EXPECT_CUDA=12.8 FDL_MAX_GCC=14" in dockerfile
    assert "FDL_MAX_CUDNN=9.10 FDL_OLDEST_ARCH=sm_61" in dockerfile
    assert 'ENV TORCH_CUDA_ARCH_LIST="6.1;12.0"' in dockerfile
    assert "-Wno-deprecated-gpu-targets" not in plan.env["TORCH_NVCC_FLAGS"]  # PyTorch adds it
    assert "# syntax=" not in dockerfile and "<<" not in dockerfile
    assert "--mount=type=cache,id=fdl-compiler-cache" in dockerfile


def test_native_with_nvcc_13_refuses_pascal_before_any_work(facts: MachineFacts) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(cli(archs="6.1;12.0", backend="native"), facts)
    error = caught.value
    assert "CUDA 13 dropped Pascal" in error.message
    assert "sm_61" in error.message
    assert "`--docker` (CUDA 12.9" in (error.hint or "")
    assert "install CUDA 12.8 or 12.9" in (error.hint or "")


@pytest.mark.parametrize(
    ("archs", "words"),
    [
        ("3.5;12.0", ["no CUDA toolkit can compile", "sm_35", "sm_120"]),
        ("3.7;10.0", ["no CUDA toolkit can compile"]),
    ],
)
def test_impossible_combinations_are_refused_with_the_reason(
    facts: MachineFacts, archs: str, words: list[str]
) -> None:
    with pytest.raises(UsageError) as caught:
        plan_build(cli(archs=archs, backend="docker"), facts)
    for word in words:
        assert word in caught.value.message


def test_docker_with_a_cuda_that_cannot_compile_an_arch(facts: MachineFacts) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(cli(archs="6.1;12.0", backend="docker", cuda="13.0"), facts)
    assert "CUDA 13.0 cannot compile sm_61" in caught.value.message
    assert "--cuda 12.8 or 12.9" in (caught.value.hint or "")


def test_auto_prefers_native_and_falls_back_to_docker(facts: MachineFacts) -> None:
    assert plan_build(cli(archs="12.0", backend="auto"), facts).backend == "native"
    plan = plan_build(cli(archs="6.1;12.0", backend="auto"), facts)
    assert plan.backend == "docker" and "native is not possible" in plan.toolkit


def test_auto_without_docker_reports_the_native_reason(facts: MachineFacts) -> None:
    no_docker = replace(facts, docker=None, docker_reason="no docker client on PATH")
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(cli(archs="6.1;12.0", backend="auto"), no_docker)
    assert "CUDA 13 dropped Pascal" in caught.value.message
    assert "no docker client" in (caught.value.details or "")


@pytest.mark.parametrize(
    ("change", "check_words"),
    [
        (
            {"tools": {**TOOLS, "gcc": "15.1.0", "g++": "15.1.0"}},
            "gcc 15.1.0 is newer than CUDA 12.8 accepts (gcc <= 14)",
        ),
        ({"tools": {**TOOLS, "python3": "3.9.2"}}, "Python 3.9.2 on this machine is older"),
        ({"cudnn": "9.12.0"}, "cuDNN 9.12.0 is too new for sm_61 (Pascal)"),
        ({"disk_free_gb": 5.0}, "5.0 GB free"),
    ],
)
def test_native_preconditions(facts: MachineFacts, change: dict, check_words: str) -> None:
    # (The system CMake is no precondition of a clone build: its venv installs pip's CMake.
    # tests/unit/test_build_preflight.py checks when the system's is.)
    machine = replace(facts, nvcc=NVCC128, **change)
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(cli(archs="6.1;12.0", backend="native"), machine)
    shown = caught.value.message + (caught.value.details or "")
    assert check_words in shown
    assert caught.value.hint


def test_disk_gb_replaces_the_estimate_and_the_refusal_names_it(facts: MachineFacts) -> None:
    machine = replace(facts, nvcc=NVCC128, disk_free_gb=8.0)
    with pytest.raises(EnvironmentProblem) as estimated:
        plan_build(cli(archs="12.0", backend="native"), machine)
    shown = estimated.value.message + (estimated.value.details or "")
    assert "8.0 GB free" in shown and "about 22 GB (fdl's estimate)" in shown
    assert "--disk-gb N" in (estimated.value.hint or "")
    plan = plan_build(cli(archs="12.0", backend="native", disk_gb=6), machine)
    assert plan.disk_gb == 6.0
    with pytest.raises(EnvironmentProblem) as given:
        plan_build(cli(archs="12.0", backend="native", disk_gb=9), machine)
    shown = given.value.message + (given.value.details or "")
    assert "a build needs 9 GB (--disk_gb)" in shown
    assert "--disk-gb N" not in (given.value.hint or "")


def test_cudnn_limit_is_lifted_without_cudnn(facts: MachineFacts) -> None:
    machine = replace(facts, nvcc=NVCC128, cudnn="9.12.0")
    request = BuildRequest(
        archs=Setting("6.1;12.0", "--archs"),
        backend=Setting("native", "--native"),
        switches={"USE_CUDNN": Setting("0", "fdl.yml")},
    )
    plan = plan_build(request, machine)
    assert plan.cuda == "12.8" and plan.env["USE_CUDNN"] == "0"


def test_cmake_4_gets_the_policy_minimum(facts: MachineFacts) -> None:
    machine = replace(facts, tools={**TOOLS, "cmake": "4.0.2"})
    plan = plan_build(cli(archs="12.0", backend="native"), machine)
    assert plan.env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5"
    # a clone build runs the venv's pip CMake (4.x today), whatever the system's is
    old = plan_build(cli(archs="12.0", backend="native"), facts)
    assert old.env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5"


def test_jobs_default_from_cores_and_ram(facts: MachineFacts) -> None:
    # 22 GB - 2 kept free = 20 GB: 4 jobs at 5 GB (flash attention), 6 at 3 GB without.
    machine = replace(facts, ram_gb=22.0, cores=16)
    assert plan_build(cli(archs="12.0", backend="native"), machine).jobs == 4
    lean = plan_build(cli(archs="12.0", backend="native", flash_attention=False), machine)
    assert lean.jobs == 6 and lean.env["USE_FLASH_ATTENTION"] == "0"
    assert plan_build(cli(archs="12.0", backend="native"), replace(machine, cores=2)).jobs == 2


def test_too_many_jobs_for_the_ram(facts: MachineFacts) -> None:
    machine = replace(facts, ram_gb=16.0)
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(cli(archs="12.0", backend="native", jobs=8), machine)
    assert "--jobs: 8 jobs need about 40 GB" in caught.value.message
    assert "--no-flash-attention" in (caught.value.hint or "")
    plan = plan_build(cli(archs="12.0", backend="native", jobs=5, flash_attention=False), machine)
    assert plan.env["MAX_JOBS"] == "5"


def test_detected_gpus_are_the_default_archs(facts: MachineFacts) -> None:
    from fdl.compat import Capability

    machine = replace(
        facts, gpus=(("GTX 1060", Capability(6, 1)), ("RTX 5060 Ti", Capability(12, 0)))
    )
    plan = plan_build(BuildRequest(), machine)
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == "6.1;12.0" and plan.backend == "docker"


def test_no_gpu_and_no_archs_is_a_usage_error(facts: MachineFacts) -> None:
    machine = replace(facts, gpu_reason="nvidia-smi not found on PATH")
    with pytest.raises(UsageError) as caught:
        plan_build(BuildRequest(), machine)
    assert "nvidia-smi not found" in caught.value.message
    assert "--archs" in (caught.value.hint or "")


def test_cpu_build_sets_use_cuda_0_and_no_arch_list(facts: MachineFacts) -> None:
    plan = plan_build(cli(cpu=True, backend="native"), facts)
    assert plan.env["USE_CUDA"] == "0" and "TORCH_CUDA_ARCH_LIST" not in plan.env
    assert plan.variant == "builds/cpu" and plan.cuda is None


def test_every_variable_is_explicit_and_leaks_are_kept_out(facts: MachineFacts) -> None:
    machine = replace(
        facts, environ={"USE_CUDA": "0", "TORCH_CUDA_ARCH_LIST": "Auto", "HOME": "/h"}
    )
    plan = plan_build(cli(archs="12.0", backend="native"), machine)
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == "12.0"
    assert plan.env["MAX_JOBS"] and plan.env["CMAKE_BUILD_TYPE"] == "Release"
    assert plan.env_removed == ()  # both are set by the plan itself
    machine = replace(facts, environ={"USE_ROCM": "1", "BUILD_CAFFE2": "1"})
    plan = plan_build(cli(archs="12.0", backend="native"), machine)
    assert plan.env_removed == ("BUILD_CAFFE2", "USE_ROCM")


def test_clone_command_without_source(facts: MachineFacts) -> None:
    plan = plan_build(cli(archs="12.0", backend="native", torch="2.10"), facts)
    clone = plan.command("clone")
    assert clone is not None and clone.argv[:8] == (
        "git",
        "clone",
        "--depth",
        "1",
        "--branch",
        "v2.10.0",
        "--recurse-submodules",
        "--shallow-submodules",
    )
    assert clone.argv[-2] == "https://github.com/pytorch/pytorch.git"
    assert clone.argv[-1] == str(plan.source_dir)
    deps = plan.command("deps")
    assert deps is not None and "pyyaml" in deps.argv and plan.venv is not None
    build = plan.command("build")
    assert build is not None and build.argv[-1].endswith("tools/build_libtorch.py")
    assert build.argv[0] == str(plan.venv / "bin" / "python") and build.cwd == str(plan.work_dir)


def test_source_tree_sets_torch_and_skips_deps(facts: MachineFacts, tmp_path: Path) -> None:
    source = tmp_path / "pytorch"
    (source / "tools").mkdir(parents=True)
    (source / "tools" / "build_libtorch.py").write_text("")
    (source / "version.txt").write_text("2.13.0a0\n")
    (source / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\n")
    machine = replace(facts, tools={**TOOLS, "cmake": "3.25.1"}, source=probe_source(source))
    plan = plan_build(cli(archs="12.0", backend="native", source=source), machine)
    assert plan.torch == "2.13.0" and plan.venv is None and plan.command("clone") is None
    # the release's build size, not 20 x the tree's (which printed "~0 GB")
    assert plan.disk_gb == 22.0 and f"{plan.disk_gb:.0f}" != "0"
    (source / "requirements.txt").write_text("# nothing\n")
    machine = replace(machine, source=probe_source(source))  # what the probe step reads
    plan = plan_build(cli(archs="12.0", backend="native", source=source), machine)
    deps = plan.command("deps")
    assert deps is not None and deps.argv[-2:] == ("-r", str(source / "requirements.txt"))


def test_not_a_source_tree(facts: MachineFacts, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        plan_build(
            cli(archs="12.0", backend="native", source=tmp_path),
            replace(facts, source=probe_source(tmp_path)),
        )
    assert "not a PyTorch source tree" in caught.value.message


def test_planning_reads_no_file_of_the_source_tree(facts: MachineFacts, tmp_path: Path) -> None:
    """The planner is pure: a checkout it was not given probed is a programming error."""
    with pytest.raises(ValueError, match="was not probed"):
        plan_build(cli(archs="12.0", backend="native", source=tmp_path), facts)


def test_manifest_values_are_reported_at_their_line(facts: MachineFacts) -> None:
    where = Location("fdl.ci.yml", 7, 5)
    request = BuildRequest(
        archs=Setting("6.1;12.0", "fdl.ci.yml:7:5"),
        cuda=Setting("13.0", "fdl.ci.yml:8:5 (libtorch.build.cuda)", Location("fdl.ci.yml", 8, 5)),
        backend=Setting("docker", "fdl.yml:3:5"),
    )
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(request, facts)
    assert str(caught.value).startswith("fdl.ci.yml:8:5: ")
    bad = BuildRequest(archs=Setting("6.1;13.7", "fdl.ci.yml:7:5", where))
    with pytest.raises(ManifestError) as error:
        plan_build(bad, facts)
    assert str(error.value).startswith("fdl.ci.yml:7:5: ") and "13.7" in error.value.message


def test_variant_name_is_distinct_when_another_build_has_the_name(facts: MachineFacts) -> None:
    machine = replace(facts, variants={"builds/sm120": ("2.13.0", "13.0")})
    plan = plan_build(cli(archs="12.0", backend="native"), machine)
    assert plan.variant == "builds/sm120-cu130-torch2.15.0"
    same = replace(facts, variants={"builds/sm120": ("2.15.0", "13.0")})
    assert plan_build(cli(archs="12.0", backend="native"), same).variant == "builds/sm120"
    named = plan_build(cli(archs="12.0", backend="native", name="mine"), machine)
    assert named.variant == "builds/mine"


def test_sccache_remote_settings_pass_through_and_are_masked(facts: MachineFacts) -> None:
    machine = replace(
        facts,
        tool_paths={**facts.tool_paths, "sccache": "/opt/bin/sccache"},
        environ={"SCCACHE_BUCKET": "team-cache", "AWS_SECRET_ACCESS_KEY": "x"},
    )
    request = BuildRequest(
        archs=Setting("12.0", "--archs"),
        backend=Setting("native", "--native"),
        cache=Setting("sccache", "--cache"),
        cache_settings={"SCCACHE_REDIS_ENDPOINT": Setting("redis://u:pw@10.0.0.5:6379", "fdl.yml")},
    )
    plan = plan_build(request, machine)
    assert plan.env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "/opt/bin/sccache"
    assert plan.env["SCCACHE_BUCKET"] == "team-cache" and plan.env["USE_CCACHE"] == "0"
    assert "SCCACHE_DIR" not in plan.env
    shown = plan.to_json()
    assert shown["env"]["SCCACHE_REDIS_ENDPOINT"] == "redis://u:***@10.0.0.5:6379"
    assert "AWS_SECRET_ACCESS_KEY" not in shown["env"]


def test_docker_keeps_cache_backend_settings_out_of_the_image(facts: MachineFacts) -> None:
    request = BuildRequest(
        archs=Setting("12.0", "--archs"),
        backend=Setting("docker", "--docker"),
        cache=Setting("sccache", "--cache"),
        cache_settings={"SCCACHE_REDIS_ENDPOINT": Setting("redis://127.0.0.1:6379", "fdl.yml")},
    )
    plan = plan_build(request, facts)
    assert plan.docker is not None
    assert "SCCACHE_REDIS_ENDPOINT" not in plan.docker.dockerfile
    assert "--mount=type=secret,id=cache_env" in plan.docker.dockerfile
    assert plan.docker.network == "host"
    assert "sccache" in plan.deps


def test_plan_json_is_complete(facts: MachineFacts) -> None:
    data = plan_build(cli(archs="7.5;12.0", ptx=True, backend="native"), facts).to_json()
    assert data["archs"]["gencode"] == parse_archs("7.5;12.0+PTX").gencode_flags()
    assert {"env", "commands", "variant", "toolkit", "estimates", "paths", "cache"} <= set(data)
    assert data["estimates"]["disk_gb"] > 0 and data["estimates"]["memory_gb"] > 0
    assert data["settings"]["archs"] == {"value": "7.5;12.0", "origin": "--archs"}


def _tree(root: Path, version: str = "2.11.0a0", *, modules: tuple[str, ...] = ()) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "build_libtorch.py").write_text("")
    (root / "version.txt").write_text(f"{version}\n")
    (root / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.27)\n")
    if modules:
        (root / ".gitmodules").write_text(
            "".join(f'[submodule "{m}"]\n\tpath = {m}\n\turl = https://x/{m}\n' for m in modules)
        )
    return root


@pytest.mark.parametrize("backend", ["native", "docker"])
def test_a_tree_without_its_submodules_is_refused_before_any_work(
    facts: MachineFacts, tmp_path: Path, backend: str
) -> None:
    modules = ("third_party/pybind11", "third_party/pthreadpool", "third_party/fbgemm")
    source = _tree(tmp_path / "pytorch", modules=modules)
    (source / "third_party" / "pybind11").mkdir(parents=True)
    (source / "third_party" / "pybind11" / "CMakeLists.txt").write_text("")
    (source / "third_party" / "pthreadpool").mkdir()  # what git leaves uninitialised: empty
    machine = replace(facts, source=probe_source(source))
    assert machine.source is not None and machine.source.submodules == 3
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(cli(archs="12.0", backend=backend, source=source), machine)
    error = caught.value
    assert "lacks 2 of its 3 submodules" in error.message
    assert "third_party/pthreadpool, third_party/fbgemm" in error.message
    assert "not a git checkout" in str(error.hint)
    assert "fdl libtorch build --fetch-only --torch 2.11.0" in str(error.hint)
    (source / ".git").mkdir()  # a git checkout: git fetches them in place
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(
            cli(archs="12.0", backend=backend, source=source),
            replace(facts, source=probe_source(source)),
        )
    assert f"git -C {source} submodule update --init --recursive" in str(caught.value.hint)


def test_nested_submodules_and_git_status_are_checked(tmp_path: Path) -> None:
    from fdl.runner import Completed

    source = _tree(tmp_path / "pytorch", modules=("third_party/fbgemm",))
    fbgemm = source / "third_party" / "fbgemm"
    fbgemm.mkdir(parents=True)
    (fbgemm / ".gitmodules").write_text('[submodule "c"]\n\tpath = external/cutlass\n')
    assert probe_source(source).missing_submodules == ("third_party/fbgemm/external/cutlass",)
    (fbgemm / "external" / "cutlass").mkdir(parents=True)
    (fbgemm / "external" / "cutlass" / "README").write_text("")
    assert probe_source(source).missing_submodules == ()
    (source / ".git").mkdir()

    class Git:
        def which(self, name: str) -> str | None:
            return "/usr/bin/git" if name == "git" else None

        def run(self, argv: list[str], **_: object) -> Completed:
            assert argv[-3:] == ["submodule", "status", "--recursive"]
            status = " 1a2b third_party/fbgemm (v1)\n-3c4d third_party/fbgemm/external/x\n"
            return Completed(list(argv), 0, status, "")

    probed = probe_source(source, Git())  # type: ignore[arg-type]
    assert probed.missing_submodules == ("third_party/fbgemm/external/x",)


def test_the_tree_version_is_the_truth(facts: MachineFacts, tmp_path: Path) -> None:
    source = _tree(tmp_path / "pytorch", "2.11.0a0")
    machine = replace(facts, source=probe_source(source))
    with pytest.raises(UsageError) as caught:
        plan_build(cli(archs="12.0", backend="native", source=source, torch="2.15"), machine)
    assert "torch 2.15 was asked for" in caught.value.message
    assert "is torch 2.11.0 (its version.txt)" in caught.value.message
    where = Location("fdl.yml", 4, 12)
    request = BuildRequest(
        archs=Setting("12.0", "--archs"),
        backend=Setting("native", "--native"),
        source=Setting(source, "--source"),
        torch=Setting("2.15", "fdl.yml:4:12", where),
    )
    with pytest.raises(ManifestError) as located:
        plan_build(request, machine)
    assert located.value.location == where
    # a prefix of the tree's version names it: planned as the tree's release
    plan = plan_build(cli(archs="12.0", backend="native", source=source, torch="2.11"), machine)
    assert plan.torch == "2.11.0"


def test_the_cmake_the_build_runs_decides_the_policy(facts: MachineFacts, tmp_path: Path) -> None:
    """The system CMake is 3.25, but the tree's requirements install pip's 4.x in the venv."""
    source = _tree(tmp_path / "pytorch", "2.11.0a0")
    (source / "requirements-build.txt").write_text("cmake>=3.27\nninja\n")
    machine = replace(facts, tools={**TOOLS, "cmake": "3.25.1"}, source=probe_source(source))
    plan = plan_build(cli(archs="12.0", backend="native", source=source), machine)
    assert plan.env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5"
    # a tree that pins CMake below 4 runs a 3.x, and a tree without one the system's 3.25
    (source / "requirements-build.txt").write_text("cmake<4\n")
    machine = replace(machine, source=probe_source(source))
    plan = plan_build(cli(archs="12.0", backend="native", source=source), machine)
    assert "CMAKE_POLICY_VERSION_MINIMUM" not in plan.env


def test_the_docker_context_copy_is_checked_too(facts: MachineFacts, tmp_path: Path) -> None:
    """A submodule linked to a directory elsewhere builds natively, but the Docker build
    context would hold a dangling link: refused when the context is made."""
    from fdl.libtorch.build._docker import _context

    source = _tree(tmp_path / "pytorch", "2.11.0a0", modules=("third_party/eigen",))
    elsewhere = tmp_path / "eigen-checkout"
    elsewhere.mkdir()
    (elsewhere / "CMakeLists.txt").write_text("")
    (source / "third_party").mkdir()
    (source / "third_party" / "eigen").symlink_to(elsewhere)
    machine = replace(facts, source=probe_source(source))
    plan = plan_build(cli(archs="12.0", backend="docker", source=source), machine)
    scratch = tmp_path / "scratch"
    with pytest.raises(EnvironmentProblem, match=r"lacks 1 submodules.*third_party/eigen"):
        _context(plan, scratch)
    (source / "third_party" / "eigen").unlink()
    (source / "third_party" / "eigen").mkdir()
    (source / "third_party" / "eigen" / "CMakeLists.txt").write_text("")
    assert (_context(plan, tmp_path / "scratch2") / "src" / "third_party" / "eigen").is_dir()


@pytest.mark.parametrize(("cuda", "flags"), [("12.6", ""), ("12.8", "-compress-mode=size")])
def test_nvcc_flags_pytorch_adds_itself_are_not_repeated(
    facts: MachineFacts, cuda: str, flags: str
) -> None:
    """Official 12.8/12.9 builds already use -compress-mode=size (build_cuda.sh); 12.6's
    libtorch build keeps nvcc's default mode. Pascal + Blackwell makes CUDA 12.8 warn about
    deprecated targets: PyTorch's Dependencies.cmake silences that itself."""
    archs = "6.1;12.0" if cuda == "12.8" else "6.1;9.0"
    plan = plan_build(cli(archs=archs, backend="docker", cuda=cuda), facts)
    assert plan.env["TORCH_NVCC_FLAGS"] == flags


def test_an_sm_120_gpu_on_driver_560_is_told_to_update(facts: MachineFacts) -> None:
    """CUDA 12.8's floor is 525, but no driver before R570 supports Blackwell."""
    machine = replace(
        facts,
        gpus=(("RTX 5060 Ti", parse_archs("12.0").capabilities[0]),),
        driver="560.35.05",
    )
    plan = plan_build(cli(backend="docker", cuda="12.8"), machine)
    driver = [p for p in plan.problems if p.check == "driver"]
    assert len(driver) == 1 and "sm_120 (Blackwell) needs driver >= 570" in driver[0].message
    # the GPU's own floor: no toolkit helps, so no "older --cuda"
    assert "upgrade the NVIDIA driver to 570 or newer" in driver[0].hint
    assert "--cuda" not in driver[0].hint
