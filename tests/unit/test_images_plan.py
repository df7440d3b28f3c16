"""Planning images from the manifest: bases, variants, overlays, labels, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.deploy._placement import ImageArchs
from fdl.deploy._prepare import archs_of_image
from fdl.errors import ManifestError, ManifestErrors, UsageError
from fdl.images import ImageSpec, MountSpec, plan_images
from fdl.libtorch.variants import read_info, write_info
from fdl.manifest import load_manifest
from tests.support.images import make_project, make_variant

TRAIN = """\
description: demo
images:
  dev: {}
  train:
    args: [--steps, "5"]
    mounts: ["./data:/workspace/data:ro", "./runs:/workspace/runs"]
"""


def plan(project: Path, *names: str, env: str | None = None) -> list[ImageSpec]:
    return plan_images(load_manifest(project, env=env), list(names), fdl_version="9.9.9")


@pytest.fixture
def cpu_project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, TRAIN)
    make_variant(project)
    return project


def test_cpu_defaults_come_from_the_data(cpu_project: Path) -> None:
    dev, train = plan(cpu_project)
    assert (dev.kind, dev.libtorch, dev.base) == ("dev", "mounted", "debian:bookworm-slim")
    assert train.kind == "train" and train.libtorch == "closure"
    assert train.base == train.build_base == "debian:bookworm-slim"
    assert "g++" in train.build_packages and train.packages == ()
    assert "g++" in dev.packages
    assert train.program == "build/train"  # from CMakeLists.txt's add_executable
    assert train.user.uid != 0 and dev.user.uid != 0
    assert train.tag == "cpp-train-train:latest"
    assert train.mounts == (
        MountSpec("./data", "/workspace/data", True),
        MountSpec("./runs", "/workspace/runs", False),
    )
    assert dict(train.env) == {"LD_LIBRARY_PATH": "/opt/libtorch/lib"}
    assert dict(dev.env)["CMAKE_PREFIX_PATH"] == "/opt/libtorch"


def test_labels_record_manifest_fdl_torch_cuda_archs_variant(cpu_project: Path) -> None:
    (train,) = plan(cpu_project, "train")
    labels = dict(train.labels)
    assert labels["dev.fdl.version"] == "9.9.9"
    assert labels["dev.fdl.torch"] == "2.13.0"
    assert labels["dev.fdl.cuda"] == "none"
    assert labels["dev.fdl.archs"] == "cpu"
    assert labels["dev.fdl.variant"] == "precompiled/cpu"
    assert labels["dev.fdl.manifest-hash"].startswith("sha256:")
    assert labels["org.opencontainers.image.description"] == "demo"
    assert labels["org.opencontainers.image.base.name"] == "debian:bookworm-slim"
    assert [name for name, _ in train.labels] == sorted(labels)


def test_a_rocm_images_labels_say_its_gfx_targets_not_cpu(tmp_path: Path) -> None:
    project = make_project(tmp_path, TRAIN)
    # as `fdl libtorch download --rocm 7.0` records it: the gfx read from libtorch_hip.so
    directory = make_variant(project, "precompiled/rocm70", torch="2.10.0")
    info = read_info(directory, "precompiled/rocm70")
    assert info is not None
    info.archs_found["gfx"] = ["gfx90a", "gfx1030"]
    write_info(directory, info)
    labels = dict(plan(project, "train")[0].labels)
    assert (labels["dev.fdl.archs"], labels["dev.fdl.cuda"]) == ("gfx90a gfx1030", "none")
    # floDl's .arch file says the same; a ROCm tree with neither (copied in by hand): `rocm`,
    # never `cpu`
    (directory / "variant.json").unlink()
    assert dict(plan(project, "train")[0].labels)["dev.fdl.archs"] == "gfx90a gfx1030"
    (directory / ".arch").unlink()
    assert dict(plan(project, "train")[0].labels)["dev.fdl.archs"] == "rocm"
    # deploy reads no nvcc codes from either
    manifest = ImageArchs("precompiled/rocm70", None, ())
    for archs in ("gfx90a gfx1030", "rocm"):
        found = archs_of_image(
            {"dev.fdl.variant": "precompiled/rocm70", "dev.fdl.cuda": "none",
             "dev.fdl.archs": archs}, "img", manifest
        )  # fmt: skip
        assert (found.cuda, found.codes) == (None, ())


def test_manifest_hash_follows_the_image_sections_but_not_secret_values(
    tmp_path: Path,
) -> None:
    def label(index: int, text: str) -> str:
        project = make_project(tmp_path / str(index), text)
        make_variant(project)
        return dict(plan(project, "train")[0].labels)["dev.fdl.manifest-hash"]

    base = label(0, TRAIN)
    # An unrelated command does not change what the image is made from.
    assert label(1, TRAIN + "commands:\n  x: {run: echo hi}\n") == base
    # An image setting does.
    assert label(2, TRAIN.replace('"5"', '"6"')) != base
    # A secret never reaches a label (it would be in the Dockerfile in clear): refused.
    with pytest.raises(ManifestError, match="is tagged !secret"):
        label(3, TRAIN + "    labels: {note: !secret aaa}\n")


def test_overlay_switches_base_and_variant(cpu_project: Path) -> None:
    make_variant(cpu_project, "builds/cpu-debug", torch="2.13.0", active=False)
    (cpu_project / "fdl.ci.yml").write_text(
        "images:\n  train:\n    base: fdl-test/debian:bookworm\n    variant: builds/cpu-debug\n",
        encoding="utf-8",
    )
    (plain,) = plan(cpu_project, "train")
    (ci,) = plan(cpu_project, "train", env="ci")
    assert plain.base == "debian:bookworm-slim"
    assert ci.base == ci.build_base == "fdl-test/debian:bookworm"
    assert ci.variant is not None and ci.variant.name == "builds/cpu-debug"
    assert dict(ci.labels)["dev.fdl.manifest-hash"] != dict(plain.labels)["dev.fdl.manifest-hash"]


def test_cuda_variant_picks_runtime_and_devel_flavours(tmp_path: Path) -> None:
    project = make_project(tmp_path, TRAIN)
    make_variant(
        project, "precompiled/cu128", torch="2.8.0", cuda="12.8", archs=("sm_86", "sm_120")
    )
    dev, train = plan(project)
    assert train.base == "nvidia/cuda:12.8.1-runtime-ubuntu24.04"
    assert train.build_base == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert dev.base == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    labels = dict(train.labels)
    assert labels["dev.fdl.cuda"] == "12.8"
    assert labels["dev.fdl.archs"] == "sm_120 sm_86"
    assert "libnvrtc-builtins.so.12.*" in train.dlopen
    assert "libcuda.so.1" in train.never_ship
    assert train.reuse_from_base  # the CUDA base provides cuBLAS & co.
    assert dict(train.env)["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    # no GPU while building: CMake gets the variant's archs instead of detecting them
    assert dict(train.build_env) == {"TORCH_CUDA_ARCH_LIST": "8.6;12.0"}


def test_cudnn_flavour_only_when_the_variant_uses_cudnn(tmp_path: Path) -> None:
    project = make_project(tmp_path, TRAIN)
    make_variant(project, "precompiled/cu128", cuda="12.8", cudnn="9.10")
    (train,) = plan(project, "train")
    assert train.base == "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
    assert train.build_base == "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"


def test_unknown_cuda_version_asks_for_a_base(tmp_path: Path) -> None:
    project = make_project(tmp_path, TRAIN)
    make_variant(project, "precompiled/cu99", cuda="9.9")
    with pytest.raises(ManifestError) as caught:
        plan(project, "train")
    assert "no default base image for CUDA 9.9" in caught.value.message
    assert caught.value.location is not None and caught.value.location.file == "fdl.yml"
    assert "base" in (caught.value.hint or "")


def test_builder_kind_uses_its_cuda_key(tmp_path: Path) -> None:
    project = make_project(tmp_path, "images:\n  builder: {cuda: 12.8}\n  src: {kind: builder}\n")
    builder, cpu = plan(project)
    assert builder.base == "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert cpu.base == "debian:bookworm-slim" and cpu.variant is None
    assert "ninja-build" in builder.packages and "python3" in builder.packages


def test_no_images_section_gives_dev_and_train(tmp_path: Path) -> None:
    project = make_project(tmp_path, "description: bare\n")
    make_variant(project)
    assert [spec.profile for spec in plan(project)] == ["dev", "train"]


def test_unknown_profile_suggests_a_close_one(cpu_project: Path) -> None:
    with pytest.raises(UsageError) as caught:
        plan(cpu_project, "trian")
    assert "did you mean 'train'" in (caught.value.hint or "")


def test_missing_variant_says_how_to_get_one(tmp_path: Path) -> None:
    project = make_project(tmp_path, TRAIN)
    with pytest.raises(UsageError) as caught:
        plan(project, "train")
    assert "no libtorch variant is active" in caught.value.message
    make_variant(project)
    (project / "fdl.yml").write_text(
        TRAIN.replace("  train:\n", "  train:\n    variant: precompiled/cu126\n"), encoding="utf-8"
    )
    with pytest.raises(UsageError) as caught:
        plan(project, "train")
    assert "not installed" in caught.value.message
    assert "precompiled/cpu" in (caught.value.hint or "")


def test_program_is_required_without_add_executable(tmp_path: Path) -> None:
    project = make_project(tmp_path, TRAIN)
    make_variant(project)
    (project / "CMakeLists.txt").write_text("project(x)\n", encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        plan(project, "train")
    assert "program" in caught.value.message


def test_secret_looking_env_is_refused_with_its_location(cpu_project: Path) -> None:
    (cpu_project / "fdl.yml").write_text(
        TRAIN + "    env:\n      HF_TOKEN: abc\n", encoding="utf-8"
    )
    with pytest.raises(ManifestError) as caught:
        plan(cpu_project, "train")
    assert "images.train.env.HF_TOKEN" in caught.value.message
    assert caught.value.location is not None and caught.value.location.line == 8
    assert "pass-env" in (caught.value.hint or "")


# Shaped like real credentials, made up here (none of them was ever issued).
TOKENS = {
    "a GitHub token": "ghp_" + "a1B2c3D4e5" * 4,
    "a GitLab token": "glpat-" + "x" * 20,
    "an AWS access key id": "AKIA" + "ABCDEFGHIJKLMNOP",
    "a Hugging Face token": "hf_" + "AbCdEfGhIj" * 3 + "klmn",
    "a PyPI token": "pypi-AgEIcHlwaS5vcmc" + "Q" * 60,
    "a Slack token": "xoxb-1234567890-abcdefghij",
    "an npm token": "npm_" + "a" * 36,
    "a private key": "-----BEGIN OPENSSH PRIVATE KEY-----",
}


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_token_shaped_env_values_are_refused_whatever_their_name(cpu_project: Path, kind) -> None:
    token = TOKENS[kind]
    (cpu_project / "fdl.yml").write_text(
        TRAIN + f"    env:\n      PLAIN: ok\n      ACCESS: '{token}'\n", encoding="utf-8"
    )
    with pytest.raises(ManifestError) as caught:
        plan(cpu_project, "train")
    error = caught.value
    assert "images.train.env.ACCESS" in error.message and kind in error.message
    assert token not in error.message and token not in (error.hint or "")
    assert error.location is not None and error.location.line == 9
    assert "pass-env" in (error.hint or "") and "secrets" in (error.hint or "")


@pytest.mark.parametrize(
    "value",
    ["/opt/libtorch/lib", "1", "sk-learn", "ghp_short", "expandable_segments:True", "AKIAshort"],
)
def test_ordinary_env_values_are_not_taken_for_tokens(cpu_project: Path, value: str) -> None:
    (cpu_project / "fdl.yml").write_text(
        TRAIN + f"    env:\n      SETTING: '{value}'\n", encoding="utf-8"
    )
    (train,) = plan(cpu_project, "train")
    assert ("SETTING", value) in train.env


def test_schema_catches_keys_of_other_kinds_and_missing_kind(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        "images:\n  dev:\n    program: build/x\n  other: {}\n  train:\n    libtorch: mounted\n",
    )
    with pytest.raises(ManifestErrors) as caught:
        load_manifest(project)
    messages = [error.message for error in caught.value.errors]
    assert any("`program:` does not apply to a dev image" in m for m in messages)
    assert any("profile 'other' needs `kind:`" in m for m in messages)
    assert any("`libtorch:` does not apply to a train image" in m for m in messages)


def test_schema_rejects_root_uid_and_bad_mounts(tmp_path: Path) -> None:
    project = make_project(
        tmp_path, "images:\n  train:\n    uid: 0\n    mounts: [data]\n    tag: Not/Valid\n"
    )
    with pytest.raises(ManifestErrors) as caught:
        load_manifest(project)
    text = "\n".join(error.message for error in caught.value.errors)
    assert "images.train.uid: must be at least 1" in text
    assert "images.train.mounts.0" in text
    assert "images.train.tag" in text


def test_explicit_values_win(cpu_project: Path) -> None:
    (cpu_project / "fdl.yml").write_text(
        """\
images:
  train:
    base: example.org/runtime:1
    build-base: example.org/build:1
    tag: registry.example.org:5000/me/train:v1
    program: out/bin/trainer
    build: make -C src
    user: runner
    uid: 4242
    strip: false
    packages: [zlib1g, ca-certificates]
    env: {OMP_NUM_THREADS: 2, FLAG: true}
    pass-env: [WANDB_API_KEY]
    secrets: {netrc: {file: ~/.netrc}, pip: {env: PIP_TOKEN}}
    gpus: none
""",
        encoding="utf-8",
    )
    (train,) = plan(cpu_project, "train")
    assert (train.base, train.build_base) == ("example.org/runtime:1", "example.org/build:1")
    assert train.tag == "registry.example.org:5000/me/train:v1"
    assert train.program_name == "trainer" and train.build_command == "make -C src"
    assert (train.user.name, train.user.uid, train.strip) == ("runner", 4242, False)
    assert train.packages == ("ca-certificates", "zlib1g")
    assert dict(train.env)["OMP_NUM_THREADS"] == "2" and dict(train.env)["FLAG"] == "true"
    assert train.pass_env == ("WANDB_API_KEY",)
    assert [s.id for s in train.secrets] == ["netrc", "pip"]
    assert train.gpus == "none"
