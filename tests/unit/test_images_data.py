"""The images table (fdl/data/images/images.yml) is complete and consistent."""

from __future__ import annotations

import fnmatch

from fdl.images._context import ESSENTIAL
from fdl.images._data import ROLES, cuda_base, images_data
from fdl.images._spec import KINDS


def test_every_role_has_a_cpu_base_and_cuda_flavours() -> None:
    data = images_data()
    assert set(data.cpu_bases) == set(ROLES)
    assert set(data.cuda_flavours) == set(ROLES)
    for flavours in data.cuda_flavours.values():
        assert set(flavours) == {"plain", "cudnn"}
        assert "cudnn" in flavours["cudnn"] and "cudnn" not in flavours["plain"]


def test_cuda_versions_name_full_tags_of_their_release() -> None:
    data = images_data()
    for short, full in data.cuda_versions.items():
        assert full.startswith(short + "."), (short, full)
        assert cuda_base(short, "runtime", cudnn=False) == (
            f"nvidia/cuda:{full}-runtime-{data.cuda_os}"
        )
    assert cuda_base("1.0", "runtime", cudnn=False) is None


def test_dlopen_lists_cover_every_cuda_major() -> None:
    data = images_data()
    majors = {version.split(".")[0] for version in data.cuda_versions}
    assert majors <= set(data.dlopen_cuda)
    for major, patterns in data.dlopen_cuda.items():
        assert any(fnmatch.fnmatch(f"libnvrtc-builtins.so.{major}.8", p) for p in patterns)
    assert data.dlopen(None) == data.dlopen_cpu


def test_users_are_not_root_and_paths_are_absolute() -> None:
    data = images_data()
    assert set(data.users) == set(KINDS)
    assert all(user.uid > 0 for user in data.users.values())
    for name in ("libtorch", "app", "workdir"):
        assert data.paths[name].startswith("/")
    assert {"build", "dev", "builder"} <= set(data.packages)
    assert "g++" in data.packages["build"]


def test_dockerignore_covers_the_essentials_and_never_ships_the_driver() -> None:
    data = images_data()
    patterns = {p.removeprefix("**/") for group in data.dockerignore for p in group.patterns}
    assert set(ESSENTIAL) <= patterns
    assert "libcuda.so.1" in data.never_ship
    assert not any(fnmatch.fnmatch("libcuda.so.1", p) for p in data.reuse_from_base)
