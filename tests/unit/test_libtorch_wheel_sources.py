"""Variants from PyTorch wheels: reading the wheel, copying the tree, NVIDIA libraries."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from fdl.binaries.synthetic import build_elf
from fdl.diagnose import Severity
from fdl.errors import UsageError
from fdl.libtorch import install_tree, resolve_target, variants, verify_variant
from fdl.libtorch.sources._nvidia import nvidia_requirements, pip_saved_files
from fdl.libtorch.sources._wheel import wheel_from_environment, wheel_from_file
from fdl.libtorch.sources._wheel_tree import FromWheel, NvidiaOptions
from fdl.paths import Context
from fdl.runner import Completed
from tests.support.fakes import FakeRunner
from tests.support.libtorch_trees import make_tree, torch_wheel

CUDA_REQUIRES = [
    "filelock",
    'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
    'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.30.7; platform_system == "Windows"',
    'triton~=3.8.0; platform_system == "Linux"',
    'optree>=0.13.0; extra == "optree"',
]


def test_nvidia_requirements_keep_this_platform_without_markers() -> None:
    assert nvidia_requirements(CUDA_REQUIRES) == [
        "cuda-toolkit[cublas,cudart]==13.0.3",
        "nvidia-cudnn-cu13==9.24.0.43",
    ]


def test_pip_saved_files() -> None:
    output = (
        "Collecting x\nSaved /c/torch-2.13.0+cpu-cp311.whl\nFile was already downloaded /c/n.whl\n"
    )
    assert pip_saved_files(output) == [Path("/c/torch-2.13.0+cpu-cp311.whl"), Path("/c/n.whl")]


def test_wheel_file_is_read(tmp_path: Path) -> None:
    wheel = torch_wheel(tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl")
    source = wheel_from_file(wheel)
    assert (source.version, source.torch_version, source.variant) == ("2.13.0+cpu", "2.13.0", "cpu")
    assert source.cuda is None and source.git_version == "feedfacecafe"
    cuda = torch_wheel(
        tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl", "2.14.1", cuda="13.0"
    )
    assert wheel_from_file(cuda).variant == "cu130"


def test_not_a_torch_wheel(tmp_path: Path) -> None:
    bad = tmp_path / "numpy-2.0-cp311.whl"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("numpy-2.0.dist-info/METADATA", "Name: numpy\nVersion: 2.0\n")
        archive.writestr("torch/version.py", "")
    with pytest.raises(UsageError, match="not a PyTorch wheel"):
        wheel_from_file(bad)
    with pytest.raises(UsageError, match="no such wheel"):
        wheel_from_file(tmp_path / "missing.whl")


def install(context: Context, source, runner=None, nvidia=None):
    target = resolve_target(context, f"precompiled/{source.variant}")
    options = nvidia or NvidiaOptions()
    return install_tree(
        context,
        target,
        FromWheel(source, runner or FakeRunner(), options).populate,
    )


def test_cpu_wheel_becomes_a_variant_without_python_parts(tmp_path: Path) -> None:
    context = Context(tmp_path / "root", project=True)
    wheel = torch_wheel(tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl")
    result = install(context, wheel_from_file(wheel))
    path = result.target.path
    assert not (path / "lib/libtorch_python.so").exists()
    assert not list(path.rglob("*.py")) and not list(path.rglob("*cpython*"))
    assert (path / "build-version").read_text() == "2.13.0+cpu\n"
    info = json.loads((path / "variant.json").read_text())
    assert info["source"]["kind"] == "wheel" and info["source"]["wheel"] == str(wheel)
    assert len(info["source"]["sha256"]) == 64
    assert info["extra"]["dropped"] == ["libtorch_python.so"]
    assert verify_variant(path, "precompiled/cpu").ok


def fake_nvidia_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("nvidia/fake/lib/libnvfake.so.13", build_elf(soname="libnvfake.so.13"))
        archive.writestr("nvidia/fake/include/fake.h", "")
        archive.writestr("nvidia_fake-13.0.dist-info/METADATA", "Name: nvidia-fake\n")
    return path


def cuda_wheel(tmp_path: Path) -> Path:
    return torch_wheel(
        tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl",
        "2.14.1",
        cuda="13.0",
        cubins=[75, 120],
        cuda_needed=("libnvfake.so.13",),
        requires=['nvidia-fake==13.0; platform_system == "Linux"'],
    )


def test_cuda_wheel_brings_nvidia_libraries(tmp_path: Path) -> None:
    context = Context(tmp_path / "root", project=True)
    source = wheel_from_file(cuda_wheel(tmp_path))
    cache = tmp_path / "wheels"

    def pip(argv: list[str]) -> Completed:
        assert argv[-1] == "nvidia-fake==13.0" and "--find-links" in argv
        saved = fake_nvidia_wheel(cache / "nvidia_fake-13.0-py3-none-any.whl")
        return Completed(argv, 0, f"Saved {saved}\n")

    runner = FakeRunner({("python3", "-m", "pip", "download"): pip})
    result = install(context, source, runner, NvidiaOptions(cache=cache))
    path = result.target.path
    assert (path / "lib/libnvfake.so.13").is_file()
    info = variants.read_info(path, "precompiled/cu130")
    assert info.cuda == "13.0" and info.archs_found["cubin"] == ["sm_75", "sm_120"]
    bundled = info.extra["nvidia_libraries"]["packages"]
    assert bundled == [
        {"from": "nvidia_fake-13.0-py3-none-any.whl", "libraries": ["libnvfake.so.13"]}
    ]
    report = verify_variant(path, "precompiled/cu130")
    assert next(c for c in report.checks if c.name == "dependencies").severity is Severity.OK


def test_cuda_wheel_without_nvidia_libraries_fails_verify(tmp_path: Path) -> None:
    context = Context(tmp_path / "root", project=True)
    source = wheel_from_file(cuda_wheel(tmp_path))
    result = install(context, source, nvidia=NvidiaOptions(bundle=False))
    info = variants.read_info(result.target.path, "precompiled/cu130")
    assert info.extra["nvidia_libraries"]["origin"] == "not bundled"
    report = verify_variant(result.target.path, "precompiled/cu130")
    check = next(c for c in report.checks if c.name == "dependencies")
    assert check.severity is Severity.ERROR and check.data["missing"] == ["libnvfake.so.13"]


def test_torch_from_a_python_environment(tmp_path: Path) -> None:
    site = tmp_path / "venv/lib/python3.11/site-packages"
    torch_dir = make_tree(site / "torch", "2.14.1", cubins=[120], cuda_needed=("libnvfake.so.13",))
    (torch_dir / "build-version").unlink()
    (torch_dir / "version.py").write_text("__version__ = '2.14.1'\ncuda = '13.0'\n")
    (torch_dir / "lib/libtorch_python.so").write_bytes(build_elf(soname="libtorch_python.so"))
    dist = site / "torch-2.14.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Name: torch\nVersion: 2.14.1\n")
    nvidia = site / "nvidia/fake/lib"
    nvidia.mkdir(parents=True)
    (nvidia / "libnvfake.so.13").write_bytes(build_elf(soname="libnvfake.so.13"))
    answer = json.dumps({"torch": str(torch_dir), "python": "/venv/bin/python"})
    runner = FakeRunner({("/venv/bin/python", "-c"): Completed([], 0, answer + "\n")})
    source = wheel_from_environment("/venv/bin/python", runner)
    assert (source.kind, source.variant, source.site_packages) == ("environment", "cu130", site)
    context = Context(tmp_path / "root", project=True)
    result = install(context, source, runner)
    path = result.target.path
    assert (path / "lib/libnvfake.so.13").is_file()
    assert not (path / "lib/libtorch_python.so").exists()
    assert variants.read_info(path, "x").source["environment"] == str(torch_dir)


def test_environment_without_torch(tmp_path: Path) -> None:
    runner = FakeRunner({("py", "-c"): Completed([], 0, '{"torch": null, "python": "py"}\n')})
    with pytest.raises(UsageError, match="has no torch"):
        wheel_from_environment("py", runner)


def test_a_wheel_that_is_not_what_was_asked_for_is_refused(tmp_path: Path) -> None:
    """pip falling back from download.pytorch.org/whl/cpu to PyPI's default CUDA build."""
    from fdl.libtorch import check_wheel

    cuda = wheel_from_file(
        torch_wheel(tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl", "2.14.1", cuda="13.0")
    )
    with pytest.raises(UsageError) as caught:
        check_wheel(cuda, index_url="https://download.pytorch.org/whl/cpu")
    assert "not the cpu build" in caught.value.message
    assert "nothing was installed" in caught.value.message
    with pytest.raises(UsageError, match=r"not torch 2\.13"):
        check_wheel(cuda, torch="2.13")
    with pytest.raises(UsageError, match="not the cpu build"):
        check_wheel(cuda, variant="cpu")
    check_wheel(cuda, torch="2.14", variant="auto", index_url="https://pypi.org/simple")
    check_wheel(cuda, torch="2.14.1", index_url="https://download.pytorch.org/whl/cu130/")


def test_the_cli_refuses_the_wrong_build_before_installing(run_fdl, tmp_path: Path) -> None:
    wheel = torch_wheel(
        tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl", "2.14.1", cuda="13.0"
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "fdl.yml").write_text("libtorch:\n  variant: cpu\n")
    result = run_fdl(["libtorch", "install", "--from-wheel", str(wheel)], cwd=project)
    assert result.exit_code == 2, result.output
    assert "but the project pins the cpu build (libtorch.variant at fdl.yml:2:12)" in result.stderr
    assert not (project / "libtorch").exists()


def test_a_wheel_index_the_release_does_not_publish_is_refused_before_pip(
    tmp_path: Path,
) -> None:
    """cu129 wheels exist for 2.10.0 (not as LibTorch archives); 2.11.0 has none."""
    from fdl.libtorch import wheel_source

    class NoPip:
        def run(self, *_: object, **__: object) -> None:
            raise AssertionError("pip must not run")

        stream = which = run

    with pytest.raises(UsageError, match=r"PyTorch 2\.11\.0 has no cu129 wheel"):
        wheel_source(
            cache=tmp_path,
            runner=NoPip(),  # type: ignore[arg-type]
            torch="2.11.0",
            index_url="https://download.pytorch.org/whl/cu129",
        )
