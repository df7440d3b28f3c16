"""CUDA_HOME for native builds is the real toolkit root, also behind a wrapper `nvcc`
(issue 14: `/usr/local/bin/nvcc` that execs the toolkit's nvcc gave CUDA_HOME=/usr/local)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.compat import toolkit
from fdl.errors import EnvironmentProblem
from fdl.libtorch.build import BuildRequest, MachineFacts, Nvcc, Setting, plan_build
from fdl.runner import SubprocessRunner
from fdl.system import find_cuda_home
from tests.support.artefacts import require_nvcc


def _toolkit(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "lib64").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("/* runtime */\n")
    (root / "lib64" / "libcudart.so.13").write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--dryrun*) echo "#$ _HERE_=' + str(root / "bin") + '" >&2;'
        ' echo "#$ TOP=' + str(root / "bin") + '/.." >&2;; esac\n'
    )
    nvcc.chmod(0o755)
    return nvcc


def _wrapper(folder: Path, real: Path) -> Path:
    folder.mkdir(parents=True)
    wrapper = folder / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_a_wrapper_nvcc_finds_the_toolkit_it_runs(tmp_path: Path) -> None:
    real = _toolkit(tmp_path / "cuda-13.0")
    wrapper = _wrapper(tmp_path / "usr" / "local" / "bin", real)
    found = find_cuda_home(str(wrapper), SubprocessRunner(), environ={})
    assert found.value == (tmp_path / "cuda-13.0").resolve()
    assert found.path == "nvcc --dryrun"


def test_cuda_home_in_the_environment_wins_when_it_is_a_toolkit(tmp_path: Path) -> None:
    real = _toolkit(tmp_path / "a")
    other = _toolkit(tmp_path / "b")
    found = find_cuda_home(
        str(real), SubprocessRunner(), environ={"CUDA_HOME": str(other.parent.parent)}
    )
    assert found.value == (tmp_path / "b").resolve() and found.path == "$CUDA_HOME"
    # a CUDA_HOME that is no toolkit is passed over
    found = find_cuda_home(str(real), SubprocessRunner(), environ={"CUDA_HOME": str(tmp_path)})
    assert found.value == (tmp_path / "a").resolve()


def test_no_toolkit_is_said_with_what_was_tried(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    lone = folder / "nvcc"
    lone.write_text("#!/bin/sh\nexit 0\n")
    lone.chmod(0o755)
    found = find_cuda_home(str(lone), SubprocessRunner(), environ={})
    if found.value is not None:  # this machine's /usr/local/cuda is the last resort
        assert found.path == "/usr/local/cuda"
        return
    assert found.reason is not None and "include/cuda_runtime.h" in found.reason
    assert str(tmp_path) in found.reason


def test_this_machines_nvcc() -> None:
    nvcc = require_nvcc()
    found = find_cuda_home(nvcc, SubprocessRunner(), environ={})
    assert found.value is not None and (found.value / "include" / "cuda_runtime.h").is_file()
    assert found.value != Path("/usr/local")


def test_a_native_cuda_build_without_a_toolkit_root_is_refused(tmp_path: Path) -> None:
    facts = MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=Nvcc(
            "12.8",
            "12.8.93",
            "/usr/local/bin/nvcc",
            toolkit("12.8").targets,
            "",
            home_reason="no CUDA toolkit root with include/cuda_runtime.h found",
        ),
        nvcc_reason=None,
        tools={
            "gcc": "12.2.0",
            "g++": "12.2.0",
            "cmake": "3.28.3",
            "python3": "3.11.2",
            "git": "2",
        },
        tool_paths={"python3": "/usr/bin/python3"},
        docker=None,
        docker_reason="no docker",
        cores=8,
        ram_gb=64.0,
        disk_free_gb=500.0,
    )
    request = BuildRequest(backend=Setting("native", "--native"), archs=Setting("8.6", "--archs"))
    with pytest.raises(EnvironmentProblem) as caught:
        plan_build(request, facts)
    assert "the CUDA toolkit of /usr/local/bin/nvcc was not found" in str(caught.value)
    assert "set CUDA_HOME" in (caught.value.hint or "")
