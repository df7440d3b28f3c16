"""The images table (fdl/data/images/images.yml) is complete and consistent with the
compatibility tables it relies on for CUDA."""

from __future__ import annotations

import fnmatch

from fdl.images._context import ESSENTIAL
from fdl.images._data import ROLES, cuda_base, cuda_runtime, images_data
from fdl.images._spec import KINDS


def test_every_role_has_a_cpu_base_and_cuda_flavours() -> None:
    data = images_data()
    assert set(data.cpu_bases) == set(ROLES)
    assert set(data.cuda_flavours) == set(ROLES)
    for flavours in data.cuda_flavours.values():
        assert set(flavours) == {"plain", "cudnn"}
        assert "cudnn" in flavours["cudnn"] and "cudnn" not in flavours["plain"]


def test_cuda_bases_come_from_the_compatibility_tables() -> None:
    assert cuda_base("12.8", "runtime", cudnn=False) == "nvidia/cuda:12.8.1-runtime-ubuntu24.04"
    assert cuda_base("12.8", "build", cudnn=True) == "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"
    assert cuda_base("13.0", "dev", cudnn=False) == "nvidia/cuda:13.0.2-devel-ubuntu24.04"
    assert cuda_base("1.0", "runtime", cudnn=False) is None
    for role in ROLES:
        for cudnn in (False, True):
            assert cuda_base("12.6", role, cudnn=cudnn) is not None


def test_cuda_runtime_lists_dlopened_shared_and_injected_libraries() -> None:
    for cuda in ("12.8", "13.0"):
        major = cuda.split(".")[0]
        runtime = cuda_runtime(cuda)
        assert any(fnmatch.fnmatch(f"libnvrtc-builtins.so.{major}.8", p) for p in runtime.dlopen)
        assert "libcudnn_ops.so.9" in runtime.dlopen
        assert "libtorch_cuda_linalg.so" in runtime.dlopen
        assert f"libcublas.so.{major}" in runtime.shared
        assert "libz.so.1" not in runtime.shared  # a system library: never taken from the base
        assert "libcuda.so.1" in runtime.never_ship
    cpu = cuda_runtime(None)
    assert cpu.dlopen == images_data().dlopen_cpu and cpu.shared == ()
    assert "libcuda.so.1" in cpu.never_ship


def test_users_are_not_root_and_paths_are_absolute() -> None:
    data = images_data()
    assert set(data.users) == set(KINDS)
    assert all(user.uid > 0 for user in data.users.values())
    for name in ("libtorch", "app", "workdir"):
        assert data.paths[name].startswith("/")
    assert {"build", "dev", "builder"} <= set(data.packages)
    assert "g++" in data.packages["build"]


def test_dockerignore_covers_the_essentials() -> None:
    patterns = {p for group in images_data().dockerignore for p in group.patterns}
    assert set(ESSENTIAL) <= patterns
