"""The planner: what each template and mode generates, and that it all fits together."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib
import yaml

from fdl.errors import UsageError
from fdl.images import plan_images
from fdl.manifest import load_manifest
from fdl.scaffold import GENERATED, USER, plan_project, read_existing
from fdl.scaffold._templates import scaffold_data
from tests.support.scaffold import CASES, TORCH, VERSION, answers, planned, write_files

CONTAINER_FILES = {"docker-compose.yml", "docker/dev.Dockerfile"}
COMMON = {
    ".dockerignore",
    ".fdl-answers.yml",
    ".fdl/fdl.schema.json",
    ".vscode/settings.json",
    ".github/workflows/ci.yml",
    ".gitignore",
    # what `fdl ci generate` writes for the manifest's ci: section
    ".github/workflows/fdl-images.yml",
    "ci/docker-bake.hcl",
    "ci/dockerfiles/libtorch-cpu.Dockerfile",
    "ci/dockerfiles/train-cpu.Dockerfile",
    "ci/dockerfiles/train-cpu.Dockerfile.dockerignore",
    "README.md",
    "docker/train.Dockerfile",
    "fdl.ci.yml",
    "fdl.yml",
}
OWN = {
    "cpp": {"CMakeLists.txt", "src/model.h", "src/train.cpp", "tests/model_test.cpp"},
    "flodl": {"Cargo.toml", "rust-toolchain.toml", "src/main.rs"},
    "tch": {"Cargo.toml", "rust-toolchain.toml", "src/main.rs"},
}
# What the flodl template adds in container modes: its GPU services and .env.example
# (floDl's own projects keep one since 0.7.0).
FLODL_CONTAINER_FILES = {"docker/cuda.Dockerfile", "docker/rocm.Dockerfile", ".env.example"}


@pytest.mark.parametrize(("template", "mode"), CASES)
def test_each_template_and_mode_plans_exactly_its_files(template: str, mode: str) -> None:
    files = planned(template, mode)
    expected = COMMON | OWN[template]
    if mode != "native":
        expected |= CONTAINER_FILES | (FLODL_CONTAINER_FILES if template == "flodl" else set())
    assert set(files) == expected
    assert list(files) == sorted(files)
    generated = {p for p, f in files.items() if f.kind == GENERATED}
    assert generated == {
        p
        for p in expected
        if p.startswith(("docker", ".dockerignore", ".github", ".fdl-answers", ".fdl/", "ci/"))
    }
    # The manifest, overlay, README, .gitignore and sources are the user's.
    assert {"fdl.yml", "fdl.ci.yml", "README.md", ".gitignore", *OWN[template]} <= {
        p for p, f in files.items() if f.kind == USER
    }


@pytest.mark.parametrize(("template", "mode"), CASES)
def test_planning_is_deterministic_and_holds_no_host_paths(template: str, mode: str) -> None:
    first, second = planned(template, mode), planned(template, mode)
    assert first == second
    for spec in first.values():
        assert "fdl-init-" not in spec.content and "/tmp/pytest" not in spec.content, spec.path
        assert str(Path.cwd()) not in spec.content  # the checkout fdl runs from
        assert spec.content.endswith("\n") and not spec.content.endswith("\n\n"), spec.path
        assert not any(line != line.rstrip() for line in spec.content.splitlines()), spec.path
        assert spec.mode == 0o644


@pytest.mark.parametrize(("template", "mode"), CASES)
def test_yaml_files_parse_and_the_manifest_validates_with_its_overlay(
    tmp_path: Path, template: str, mode: str
) -> None:
    files = planned(template, mode)
    for path, spec in files.items():
        if path.endswith((".yml", ".yaml")):
            assert isinstance(yaml.safe_load(spec.content), dict), path
    project = write_files(tmp_path / "demo", files)
    base = load_manifest(project, environ={})
    ci = load_manifest(project, env="ci", environ={})
    commands = base.get("commands")
    for name, spec in commands.items():
        if mode == "native":
            assert "docker" not in spec, name
        else:
            # `gpu`: fdl's logical service, `cuda` or `rocm` from the active variant
            assert spec["docker"] in ("dev", "gpu"), name
    # CI runs everything on the machine itself, the training run is short.
    ci_commands = ci.get("commands")
    for name in ("build", "test", "train"):
        assert "docker" not in ci_commands[name]
    assert ci_commands["train"]["run"] != commands["train"]["run"]
    # the flodl template pins the torch its floDl release compiles against, and no
    # variant: `fdl setup` picks the build for the GPUs (a CPU pin made it plan the CPU
    # build on a GPU machine); the cpp template's quick start stays on the CPU build
    if template == "flodl":
        assert base.get("libtorch") == {"torch": "2.10.0"}
    elif template == "tch":  # tch 0.26.0's torch-sys demands 2.13.0
        assert base.get("libtorch") == {"torch": "2.13.0", "variant": "cpu"}
    else:
        assert base.get("libtorch") == {"torch": TORCH, "variant": "cpu"}


@pytest.mark.parametrize(("template", "mode"), CASES)
def test_images_come_from_fdl_images_and_the_base_can_be_configured(
    tmp_path: Path, template: str, mode: str
) -> None:
    from fdl.images import render_dockerfile
    from fdl.scaffold._images import scaffold_resolver

    files = planned(template, mode)
    project = write_files(tmp_path / "demo", files)
    manifest = load_manifest(
        project, environ={}, sets=["images.train.base=fdl-test/debian:bookworm"]
    )
    cuda = {"cu128": ("12.8", True)} if template == "flodl" else {"cu130": ("13.0", True)}
    resolver = scaffold_resolver(answers(template, mode), cuda)
    specs = {s.profile: s for s in plan_images(manifest, resolver=resolver, fdl_version=VERSION)}
    train = specs["train"]
    assert (train.base, train.build_base) == ("fdl-test/debian:bookworm",) * 2
    assert train.tag == "demo-train:latest"
    # The generated Dockerfile is exactly what fdl.images renders for the manifest.
    unset = {
        s.profile: s
        for s in plan_images(
            load_manifest(project, environ={}), resolver=resolver, fdl_version=VERSION
        )
    }
    for profile, spec in unset.items():
        expected = render_dockerfile(spec, regenerate="fdl init . --force")
        assert files[f"docker/{profile}.Dockerfile"].content == expected
    if mode != "native":
        assert specs["dev"].libtorch == mode
        compose = yaml.safe_load(files["docker-compose.yml"].content)
        assert compose["services"]["dev"]["user"] == "${FDL_UID:-1000}:${FDL_GID:-1000}"
        volumes = compose["services"]["dev"]["volumes"]
        assert any(v.endswith(":/opt/libtorch:ro") for v in volumes) == (mode == "mounted")


def test_cpp_project_builds_with_cmake_and_find_package_torch() -> None:
    files = planned("cpp", "native")
    cmake = files["CMakeLists.txt"].content
    assert "find_package(Torch REQUIRED)" in cmake
    assert "set(CMAKE_CXX_STANDARD 20)" in cmake  # torch 2.13 needs C++20 (fdl's tables)
    assert "project(demo LANGUAGES CXX)" in cmake
    assert re.search(r"add_test\(NAME model_test", cmake)
    assert "add_executable(train src/train.cpp)" in cmake
    assert (
        "CMAKE_CXX_STANDARD 17" in planned("cpp", "native", torch="2.12")["CMakeLists.txt"].content
    )
    manifest = yaml.safe_load(files["fdl.yml"].content)
    assert manifest["commands"]["test"]["run"].endswith(
        "ctest --test-dir build --output-on-failure"
    )
    assert manifest["images"]["train"]["program"] == "build/train"


def _features(command: str) -> set[str]:
    return {f for match in re.findall(r"--features[ =](\S+)", command) for f in match.split(",")}


@pytest.mark.parametrize("mode", ["mounted", "baked", "native"])
def test_flodl_gpu_commands_and_cargo_features_agree(mode: str) -> None:
    """floDl 0.8's scaffold contract: gpu-build, gpu-test, gpu-run, gpu-shell (and our
    gpu-train) over `--features "$FDL_GPU_FEATURE"` in the `gpu` service, and both
    features that variable can name declared (floDl's own scaffold forgets `rocm`)."""
    files = planned("flodl", mode, name="my-model")
    cargo = tomllib.loads(files["Cargo.toml"].content)
    assert cargo["package"]["name"] == "my_model"
    assert cargo["package"]["edition"] == "2024"
    assert cargo["dependencies"]["flodl"] == "0.8.0"
    assert cargo["features"]["cuda"] == ["flodl/cuda"]
    assert cargo["features"]["rocm"] == ["flodl/rocm"]
    commands = yaml.safe_load(files["fdl.yml"].content)["commands"]
    gpu = {name for name in commands if name.startswith("gpu-")}
    expected = {"gpu-build", "gpu-test", "gpu-run", "gpu-train"}
    assert gpu == (expected | {"gpu-shell"} if mode != "native" else expected)
    for name in gpu - {"gpu-shell"}:
        assert '--features "$FDL_GPU_FEATURE"' in commands[name]["run"], name
        assert commands[name].get("docker") == ("gpu" if mode != "native" else None)
    assert commands["gpu-run"]["run"] == 'cargo run --features "$FDL_GPU_FEATURE" --'
    assert {f for spec in commands.values() for f in _features(spec["run"])} == {
        '"$FDL_GPU_FEATURE"'
    }
    # neither fdl's built-in `run` nor floDl 0.8's built-in `start` (a cluster start);
    # none of the old cuda-* names
    assert not {"run", "start"} & set(commands)
    assert not any(name.startswith("cuda-") for name in commands)
    assert commands["train-debug"]["run"] == "cargo run --"
    # `-- --nocapture` is appended after the user's arguments, not part of `run:`.
    for name in ("test", "gpu-test"):
        assert "--nocapture" not in commands[name]["run"]
        assert commands[name]["append"] == "-- --nocapture"
    assert cargo["profile"]["release"]["lto"] == "thin"


def test_flodl_rocm_service_has_amds_devices_and_env_example_its_knobs() -> None:
    files = planned("flodl", "mounted")
    compose = yaml.safe_load(files["docker-compose.yml"].content)["services"]
    rocm = compose["rocm"]
    assert rocm["devices"] == ["/dev/kfd", "/dev/dri"]
    assert rocm["group_add"] == ["video", "render"]
    assert "./libtorch/precompiled/rocm70:/opt/libtorch:ro" in rocm["volumes"]
    assert "deploy" not in rocm and "devices" not in compose["cuda"]
    assert "devices" not in compose["dev"]
    for service in ("dev", "cuda", "rocm"):  # as floDl 0.8's compose forwards them
        assert {"FDL_GPU_FEATURE", "FLODL_VERBOSITY", "FLODL_NET_TIMEOUT_SCALE"} <= set(
            compose[service]["environment"]
        ), service
    dockerfile = files["docker/rocm.Dockerfile"].content
    assert "ARG BASE_IMAGE=rocm/dev-ubuntu-24.04:7.0-complete" in dockerfile
    # ROCm's libraries first: libtorch's bundled ROCm does not match the host's driver
    assert 'LD_LIBRARY_PATH="/opt/rocm/lib:/opt/libtorch/lib"' in dockerfile
    env = files[".env.example"].content
    lines = [line for line in env.splitlines() if line.startswith("#") and "=" in line]
    knobs = {line[1:].split("=", 1)[0] for line in lines if line[1:2].isupper()}
    assert knobs == {
        "FDL_UID",
        "FDL_GID",
        "LIBTORCH_CUDA_PATH",
        "CARGO_BUILD_JOBS",
        "FLODL_VERBOSITY",
        "FLODL_NET_TIMEOUT_SCALE",
    }
    assert "!.env.example" in files[".gitignore"].content  # `.env.*` would hide it
    assert "LIBTORCH_CUDA_PATH" not in planned("flodl", "baked")[".env.example"].content
    assert ".env.example" not in planned("flodl", "native")


def test_tch_template_pins_tch_and_the_torch_its_torch_sys_checks() -> None:
    files = planned("tch", "native", name="my-model")
    cargo = tomllib.loads(files["Cargo.toml"].content)
    assert cargo["package"]["name"] == "my_model"
    assert cargo["dependencies"] == {"tch": "=0.26.0"}
    manifest = yaml.safe_load(files["fdl.yml"].content)
    assert manifest["libtorch"] == {"torch": "2.13.0", "variant": "cpu"}
    assert manifest["commands"]["train"]["run"] == "cargo run --release --"
    overlay = yaml.safe_load(files["fdl.ci.yml"].content)
    assert overlay["commands"]["train"]["run"] == "cargo run --release -- --epochs 3"
    train = files["docker/train.Dockerfile"].content
    assert "LIBTORCH=/opt/libtorch cargo build --release" in train
    readme = files["README.md"].content
    assert "fdl setup " in readme and "torch 2.13.0" in readme
    assert "flodl" not in readme.lower()
    with_gpus = yaml.safe_load(planned("tch", "native", gpus="8.0")["fdl.yml"].content)
    assert with_gpus["libtorch"] == {"torch": "2.13.0"}  # fdl setup picks the GPU build
    with pytest.raises(
        UsageError, match=re.escape("tch-rs 0.26.0, which compiles against torch 2.13.0")
    ):
        planned("tch", "native", torch="2.10.0")
    with pytest.raises(UsageError, match="reserves it"):
        planned("tch", "native", name="torch-sys")


def test_flodl_images_install_rust_and_point_the_build_at_libtorch() -> None:
    files = planned("flodl", "mounted")
    dev = files["docker/dev.Dockerfile"].content
    assert "sh /tmp/rustup-init.sh -y" in dev and "ln -s /opt/cargo/bin/* /usr/local/bin/" in dev
    assert 'RUSTUP_HOME="/opt/rustup"' in dev and 'LIBTORCH_PATH="/opt/libtorch"' in dev
    cuda = files["docker/cuda.Dockerfile"].content
    # floDl 0.8.0 -> torch 2.10.0, whose PyPI default CUDA build is cu128
    assert re.search(r"ARG BASE_IMAGE=nvidia/cuda:12\.8\.\d+-cudnn-devel-ubuntu", cuda)
    compose = yaml.safe_load(files["docker-compose.yml"].content)
    assert (
        "${LIBTORCH_CUDA_PATH:-./libtorch/precompiled/cu128}:/opt/libtorch:ro"
        in compose["services"]["cuda"]["volumes"]
    )
    assert "deploy" in compose["services"]["cuda"] and "deploy" not in compose["services"]["dev"]
    train = files["docker/train.Dockerfile"].content
    assert "LIBTORCH_PATH=/opt/libtorch cargo build --release" in train
    assert "install -D -m 0755 target/release/demo /out/app/bin/demo" in train


def test_flodl_pins_one_rust_toolchain_that_the_images_install() -> None:
    import tomllib

    files = planned("flodl", "mounted")
    pin = tomllib.loads(files["rust-toolchain.toml"].content)["toolchain"]
    assert re.fullmatch(r"1\.\d+\.\d+", pin["channel"])  # a release, not `stable`
    for profile in ("dev", "cuda", "rocm", "train"):
        text = files[f"docker/{profile}.Dockerfile"].content
        assert f"--default-toolchain {pin['channel']} " in text, profile
        assert "error: cannot fetch rustup from https://sh.rustup.rs" in text, profile
    cargo = tomllib.loads(files["Cargo.toml"].content)
    assert cargo["package"]["rust-version"] == "1.91"  # floDl 0.8.0's


def test_the_train_image_caches_what_cargo_reuses() -> None:
    """cargo's registry, git checkouts and target/ in BuildKit caches (ccache cannot
    cache rustc); the program leaves target/ in the same step."""
    train = planned("flodl", "mounted")["docker/train.Dockerfile"].content
    build_step = train[train.index("COPY . .") : train.index("install -D")]
    assert "--mount=type=cache,id=fdl-cargo-registry,target=/root/.cargo/registry" in build_step
    assert "--mount=type=cache,id=fdl-cargo-git,target=/root/.cargo/git" in build_step
    assert "--mount=type=cache,id=fdl-cargo-target-demo-train,target=/src/target" in build_step
    assert "ccache" not in build_step and "CCACHE_DIR" not in train
    cpp = planned("cpp", "mounted")["docker/train.Dockerfile"].content
    assert "--mount=type=cache,id=fdl-ccache,target=/root/.cache/ccache" in cpp
    assert "cargo" not in cpp


@pytest.mark.skipif(shutil.which("rustfmt") is None, reason="rustfmt is not installed")
def test_flodl_main_rs_is_valid_rust(tmp_path: Path) -> None:
    """rustfmt parses the file (crates.io is unreachable here, so it cannot be compiled)."""
    source = tmp_path / "main.rs"
    source.write_text(planned("flodl", "native")["src/main.rs"].content)
    proc = subprocess.run(
        ["rustfmt", "--edition", "2024", "--check", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_example_mode_commits_the_example_and_ignores_the_local_manifest(tmp_path: Path) -> None:
    files = planned("cpp", "native", example=True)
    assert "fdl.yml.example" in files and "fdl.yml" not in files
    assert "/fdl.yml\n" in files[".gitignore"].content
    project = write_files(tmp_path / "demo", files)
    assert load_manifest(project, env="ci", environ={}).example


def test_images_are_planned_from_the_projects_own_manifest_when_it_exists(tmp_path: Path) -> None:
    files = planned("cpp", "mounted")
    mine = files["fdl.yml"].content.replace(
        "  train:\n    build:", "  train:\n    base: me/base:1\n    build:"
    )
    project = write_files(tmp_path / "demo", files)
    (project / "fdl.yml").write_text(mine)
    existing = read_existing(project, ["fdl.yml", "fdl.ci.yml", "missing.yml"])
    assert set(existing) == {"fdl.yml", "fdl.ci.yml"}
    again = {
        f.path: f
        for f in plan_project(answers("cpp", "mounted"), fdl_version=VERSION, existing=existing)
    }
    assert "ARG BASE_IMAGE=me/base:1" in again["docker/train.Dockerfile"].content
    assert again["fdl.yml"] == files["fdl.yml"]  # the template's, for the writer to compare


def test_the_shared_data_file_is_complete() -> None:
    data = scaffold_data()
    assert data["schema_version"] == 1 and data["answers_file"].startswith(".")
    assert set(data["ci"]["actions"]) == {"checkout", "setup_python", "cache"}
    assert data["ci"]["cpu_wheel_index"].startswith("https://")


def test_readme_lists_the_manifests_commands() -> None:
    files = planned("flodl", "baked")
    readme = files["README.md"].content
    for name in yaml.safe_load(files["fdl.yml"].content)["commands"]:
        assert f"| `fdl {name}` |" in readme
    assert "fdl train -- --epochs 20" in readme


# --- what floDl's own scaffold gives: the HuggingFace playground, graphviz, the services ---


def test_the_hf_playground_is_a_crate_of_its_own_reached_by_a_command() -> None:
    without = planned("flodl", "native")
    files = planned("flodl", "native", hf=True)
    assert set(files) - set(without) == {
        "flodl-hf/Cargo.toml",
        "flodl-hf/README.md",
        "flodl-hf/fdl.yml",
        "flodl-hf/src/main.rs",
    }
    cargo = files["flodl-hf/Cargo.toml"].content
    assert 'flodl = "=0.8.0"' in cargo and 'flodl-hf = "=0.8.0"' in cargo
    assert files["Cargo.toml"].content == without["Cargo.toml"].content  # untouched
    manifest = yaml.safe_load(files["fdl.yml"].content)
    assert manifest["commands"]["flodl-hf"] == {
        "description": "The HuggingFace playground: fdl flodl-hf classify",
        "path": "flodl-hf",
    }
    nested = yaml.safe_load(files["flodl-hf/fdl.yml"].content)
    assert nested["commands"]["classify"]["run"] == "cargo run --release --"
    assert "docker" not in nested["commands"]["classify"]  # native: on this machine
    assert "\n/flodl-hf/target/\n" in files[".gitignore"].content  # the playground's build
    assert "flodl-hf" not in without[".gitignore"].content
    assert "hf: true" in files[".fdl-answers.yml"].content
    assert "hf:" not in without[".fdl-answers.yml"].content
    mounted = planned("flodl", "mounted", hf=True)
    assert (
        yaml.safe_load(mounted["flodl-hf/fdl.yml"].content)["commands"]["classify"]["docker"]
        == "dev"
    )
    assert "HF_HOME: /workspace/.cache/huggingface" in mounted["fdl.yml"].content


def test_only_the_flodl_template_has_the_hf_playground() -> None:
    with pytest.raises(UsageError, match="flodl-hf") as caught:
        answers("cpp", "native", hf=True)
    assert caught.value.hint is not None and "--template flodl" in caught.value.hint


@pytest.mark.parametrize("mode", ["mounted", "baked"])
def test_flodl_images_have_graphviz(mode: str) -> None:
    files = planned("flodl", mode)
    for name in ("dev", "cuda", "train"):
        assert "graphviz" in files[f"docker/{name}.Dockerfile"].content, name
    train = files["docker/train.Dockerfile"].content
    runtime = train[train.rindex("\nFROM ") :]  # the last stage: what the image runs with
    assert "graphviz" in runtime


def test_the_cpu_dev_service_never_mounts_the_active_variant() -> None:
    compose = yaml.safe_load(planned("flodl", "mounted")["docker-compose.yml"].content)
    dev = compose["services"]["dev"]["volumes"]
    assert "./libtorch/precompiled/cpu:/opt/libtorch:ro" in dev
    assert not any("LIBTORCH_HOST_PATH" in volume for volume in dev)


def test_the_cuda_service_follows_the_active_cuda_variant(tmp_path: Path) -> None:
    from fdl.tasks._compose_file import load_compose
    from fdl.tasks._env import apply_changes
    from fdl.tasks._libtorch_env import active_libtorch, compose_variables
    from tests.support.tasks_helpers import fake_libtorch

    project = write_files(tmp_path, planned("flodl", "mounted"))

    def mounted(service: str) -> set[Path]:
        environ = apply_changes({}, compose_variables(active_libtorch(project, {})))
        compose = load_compose(project / "docker-compose.yml", environ)
        return {m.source for m in compose.mounts[service] if m.target == "/opt/libtorch"}

    libtorch = project / "libtorch"
    fake_libtorch(project, "precompiled/cu126", cuda="12.6")
    assert mounted("cuda") == {libtorch / "precompiled/cu126"}  # the active CUDA build
    assert mounted("dev") == {libtorch / "precompiled/cpu"}  # never a CUDA one
    fake_libtorch(project, "precompiled/cpu", cuda=None)
    assert mounted("cuda") == {
        libtorch / "precompiled/cu128"
    }  # the default CUDA build, not the CPU one
    assert "follow-active" not in planned("flodl", "baked")["fdl.yml"].content
