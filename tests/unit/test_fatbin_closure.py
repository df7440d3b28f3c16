"""ELF dependency closure: RPATH/RUNPATH order, $ORIGIN, dlopen'd extras, a rootfs."""

from __future__ import annotations

from pathlib import Path

from fdl.binaries import dependency_closure, ld_so_conf_dirs
from fdl.binaries.synthetic import build_elf


def _lib(path: Path, **dynamic: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(build_elf({".text": b"\0"}, soname=path.name, **dynamic))  # type: ignore[arg-type]
    return path


def _wheel_layout(root: Path) -> Path:
    """torch/lib with RPATH $ORIGIN/../../nvidia/..., like the PyPI CUDA wheel."""
    site = root / "site-packages"
    _lib(site / "nvidia/cu13/lib/libcublasLt.so.13")
    _lib(
        site / "nvidia/cu13/lib/libcublas.so.13", needed=["libcublasLt.so.13"], runpath=["$ORIGIN"]
    )
    _lib(site / "nvidia/cu13/lib/libnvrtc-builtins.so.13.0")
    _lib(site / "nvidia/cudnn/lib/libcudnn.so.9", runpath=["$ORIGIN"])
    _lib(site / "nvidia/cudnn/lib/libcudnn_ops.so.9", needed=["libz.so.1"], runpath=["$ORIGIN"])
    _lib(site / "torch/lib/libc10.so", needed=["libc.so.6"])
    rpath = ["$ORIGIN/../../nvidia/cudnn/lib", "${ORIGIN}/../../nvidia/cu13/lib", "$ORIGIN"]
    return _lib(
        site / "torch/lib/libtorch_cuda.so",
        needed=["libc10.so", "libcublas.so.13", "libcudnn.so.9", "libcuda.so.1", "libc.so.6"],
        rpath=rpath,
    )


def test_closure_follows_origin_rpaths(tmp_path: Path) -> None:
    program = _wheel_layout(tmp_path)
    closure = dependency_closure(program, skip={"libcuda.so.1", "libc.so.6"}, system_dirs=())
    names = [name for name, _ in closure.found]
    assert names == ["libc10.so", "libcublas.so.13", "libcudnn.so.9", "libcublasLt.so.13"]
    assert closure.ok
    assert set(closure.skipped) == {"libcuda.so.1", "libc.so.6"}
    assert dict(closure.found)["libcublasLt.so.13"].parent.name == "lib"


def test_dlopened_libraries_join_the_closure(tmp_path: Path) -> None:
    program = _wheel_layout(tmp_path)
    closure = dependency_closure(
        program,
        also_load=["libcudnn_ops.so.9", "libnvrtc-builtins.so.13.*"],
        skip={"libcuda.so.1", "libc.so.6"},
        system_dirs=(),
    )
    found = dict(closure.found)
    assert "libcudnn_ops.so.9" in found and "libnvrtc-builtins.so.13.0" in found
    assert closure.missing == (("libz.so.1", str(found["libcudnn_ops.so.9"])),)


def test_search_dirs_and_missing_libraries(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    _lib(extra / "libfoo.so.1")
    program = _lib(tmp_path / "bin/app", needed=["libfoo.so.1", "libbar.so.2"])
    closure = dependency_closure(program, [extra], system_dirs=())
    assert dict(closure.found) == {"libfoo.so.1": extra / "libfoo.so.1"}
    assert closure.missing == (("libbar.so.2", str(program)),)
    assert not closure.ok


def test_rpath_wins_over_search_dirs_and_runpath_loses(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _lib(first / "libfoo.so.1")
    _lib(second / "libfoo.so.1")
    with_rpath = _lib(tmp_path / "a", needed=["libfoo.so.1"], rpath=[str(first)])
    with_runpath = _lib(tmp_path / "b", needed=["libfoo.so.1"], runpath=[str(first)])
    assert dependency_closure(with_rpath, [second], system_dirs=()).paths == [first / "libfoo.so.1"]
    assert dependency_closure(with_runpath, [second], system_dirs=()).paths == [
        second / "libfoo.so.1"
    ]


def test_closure_inside_a_rootfs(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    _lib(root / "usr/lib/x86_64-linux-gnu/libz.so.1")
    _lib(root / "opt/cuda/lib/libcudart.so.13")
    conf = root / "etc/ld.so.conf.d/cuda.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("# cuda\n/opt/cuda/lib\n")
    (root / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    program = _lib(root / "app/bin/train", needed=["libz.so.1", "libcudart.so.13"])
    assert ld_so_conf_dirs(root) == ["/opt/cuda/lib"]
    closure = dependency_closure(program, root=root)
    assert dict(closure.found) == {
        "libz.so.1": root / "usr/lib/x86_64-linux-gnu/libz.so.1",
        "libcudart.so.13": root / "opt/cuda/lib/libcudart.so.13",
    }


def test_non_elf_candidates_are_skipped(tmp_path: Path) -> None:
    fake, real = tmp_path / "fake", tmp_path / "real"
    fake.mkdir()
    (fake / "libfoo.so.1").write_text("INPUT(libfoo.so.1.2)\n")  # a linker script, not ELF
    _lib(real / "libfoo.so.1")
    program = _lib(tmp_path / "app", needed=["libfoo.so.1"])
    assert dependency_closure(program, [fake, real], system_dirs=()).paths == [real / "libfoo.so.1"]
