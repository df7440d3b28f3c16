"""The wheel format's readers (fdl.formats.wheel) and the generated files' templates
(fdl.formats.templates), without a server or a wheel."""

from __future__ import annotations

import hashlib

import pytest

from fdl.errors import FdlError
from fdl.formats.templates import render
from fdl.formats.wheel import (
    applicable,
    build_number,
    canonical,
    dist_info_member,
    exact_pins,
    newest_pinned,
    parse_metadata,
    parse_record,
    parse_wheel_name,
    version_key,
)
from fdl.net import IndexFile
from tests.support.cpu_view_wheels import record_line

# --- file names --------------------------------------------------------------------------


def test_a_wheel_name_s_parts_and_build_tag() -> None:
    name = "torch-2.10.0+cpu-2-cp311-cp311-manylinux_2_28_x86_64.whl"
    parsed = parse_wheel_name(name)
    assert parsed is not None
    assert (parsed.name, parsed.version, parsed.build) == ("torch", "2.10.0+cpu", "2")
    assert parsed.tags == "cp311-cp311-manylinux_2_28_x86_64"
    assert parsed.for_linux("x86_64") and not parsed.for_linux("aarch64")
    assert build_number(name) == 2
    assert build_number("torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl") == 0


@pytest.mark.parametrize("name", ["torch-2.10.0.tar.gz", "torch.whl", "torch-2.10.0-x.whl", ""])
def test_a_name_that_is_no_wheel_s_is_none(name: str) -> None:
    wheel = parse_wheel_name("torch-2.10.0-py3-none-any.whl")  # a wheel's name, read
    assert wheel is not None and wheel.tags == "py3-none-any"
    assert parse_wheel_name(name) is None


def test_a_pure_wheel_fits_any_machine_only_when_asked() -> None:
    parsed = parse_wheel_name("cuda_toolkit-13.0.3-py3-none-any.whl")
    assert parsed is not None
    assert parsed.for_linux("aarch64", any_platform=True) and not parsed.for_linux("aarch64")


def test_versions_sort_by_number_and_names_are_canonical() -> None:
    assert sorted(["2.10.0", "2.9.1", "2.²"], key=version_key) == ["2.²", "2.9.1", "2.10.0"]
    assert canonical("Nvidia_CUDA.runtime--cu12") == "nvidia-cuda-runtime-cu12"


# --- METADATA and Requires-Dist ----------------------------------------------------------


def test_metadata_headers_and_the_dist_info_member() -> None:
    found = parse_metadata(
        "Name: torch\nVersion: 2.10.0\nRequires-Dist: a\nRequires-Dist: b\n\nbody"
    )
    assert (found.name, found.version, found.requires) == ("torch", "2.10.0", ("a", "b"))
    assert parse_metadata("").name is None
    names = ["torch/x.py", "torch-2.10.0.dist-info/RECORD", "a/b.dist-info/x/METADATA"]
    assert dist_info_member(names, "RECORD") == "torch-2.10.0.dist-info/RECORD"
    assert dist_info_member(names, "METADATA") is None


REQUIRES = [
    'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.30.7; platform_system == "Windows"',
    'nvidia-cufile==1.15.1; platform_machine == "x86_64"',
    'cuda-toolkit[cublas]==13.0.3; extra == "cuda"',
    "triton~=3.8.0",
    "not a requirement ((",
]


def test_exact_pins_are_the_ones_that_apply_on_linux_on_the_machine() -> None:
    assert exact_pins(REQUIRES) == {
        "nvidia-cudnn-cu13": "==9.24.0.43",
        "nvidia-cufile": "==1.15.1",
    }
    assert "nvidia-cufile" not in exact_pins(REQUIRES, machine="aarch64")
    assert exact_pins(REQUIRES, ["cuda"])["cuda-toolkit"] == "==13.0.3"


def test_applicable_skips_lines_that_are_no_requirement() -> None:
    found = [r.name for r in applicable(REQUIRES, {"platform_system": "Linux"})]
    # the Windows pin, the extra not chosen and the line that is no requirement: left out
    assert found == ["nvidia-cudnn-cu13", "nvidia-cufile", "triton"]


def _file(name: str, yanked: bool = False) -> IndexFile:
    return IndexFile(name, f"https://i/{name}", None, None, None, yanked)


def test_the_newest_pinned_wheel_for_the_machine_or_any() -> None:
    files = [
        _file("nvidia_cudnn_cu13-9.24.0.43-py3-none-manylinux_2_27_x86_64.whl"),
        _file("nvidia_cudnn_cu13-9.24.0.44-py3-none-manylinux_2_27_x86_64.whl", yanked=True),
        _file("nvidia_cudnn_cu13-9.24.0.43-py3-none-manylinux_2_27_aarch64.whl"),
        _file("nvidia_cudnn_cu13-9.25.0.1-py3-none-manylinux_2_27_x86_64.whl"),
    ]
    best = newest_pinned(files, "nvidia-cudnn-cu13", "==9.24.*", "x86_64")
    assert best is not None and best.filename == files[0].filename
    assert newest_pinned(files, "nvidia-cudnn-cu13", "==9.26.*", "x86_64") is None


# --- generated files ---------------------------------------------------------------------


def test_a_template_is_filled_and_a_hostile_value_refused() -> None:
    text = render(
        "libtorch/libtorch.so.ld.in", "linker", build="2.10.0+cu128", source="s", hint="h"
    )
    assert "torch 2.10.0+cu128 wheel" in text and "INPUT(-ltorch_cpu -lc10)" in text
    assert "@" not in text
    cmake = render(
        "libtorch/TorchConfig.cmake.in",
        "cmake",
        build="2.10.0+cu128",
        abi="1",
        source="s",
        hint="h",
    )
    assert '"${TORCH_INSTALL_PREFIX}/include"' in cmake and "_GLIBCXX_USE_CXX11_ABI=1" in cmake
    with pytest.raises(FdlError):
        render(
            "libtorch/libtorch.so.ld.in",
            "linker",
            build="x */ INPUT(/etc/passwd)",
            source="s",
            hint="h",
        )


# --- RECORD ------------------------------------------------------------------------------


def test_record_lines_become_hex_digests_and_sizes() -> None:
    text = "\r\n".join(
        [
            record_line("torch/lib/libc10.so", b"libc10"),
            record_line("torch/include/a,b.h", b"").replace(
                "torch/include/a,b.h", '"torch/include/a,b.h"'
            ),
            'torch/include/say ""hi"".h,sha256='
            + record_line("x", b"q").split("sha256=")[1].split(",")[0]
            + ",1",
            "torch-2.10.0.dist-info/RECORD,,",
            "torch/lib/old.so,md5=abc,3",
            "",
        ]
    ).encode()
    text = text.replace(b'torch/include/say ""hi"".h', b'"torch/include/say ""hi"".h"')
    assert parse_record(text) == {
        "torch/lib/libc10.so": (hashlib.sha256(b"libc10").hexdigest(), 6),
        "torch/include/a,b.h": (hashlib.sha256(b"").hexdigest(), 0),
        'torch/include/say "hi".h': (hashlib.sha256(b"q").hexdigest(), 1),
    }


@pytest.mark.parametrize("digest", ["a", "!!!!", "abc", "", "YWJj" * 20])
def test_a_digest_that_is_not_a_sha256_matches_nothing(digest: str) -> None:
    assert parse_record(f"torch/lib/x.so,sha256={digest},5\n".encode()) == {
        "torch/lib/x.so": ("", 5)
    }
