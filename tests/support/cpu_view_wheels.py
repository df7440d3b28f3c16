"""Synthetic torch and NVIDIA wheels, and a package index serving them on 127.0.0.1, for
the CPU view (``fdl libtorch install --from-wheel --cpu``) without the network.

The torch wheel is laid out as PyPI's x86_64 wheels are: ``torch/include``, ``torch/lib``
(synthetic ELF libraries whose DT_NEEDED entries are a real wheel's: libtorch_cpu.so needs
libc10.so, libgomp.so.1, the CUDA runtime and CUPTI), ``torch/share/cmake``,
``torch/version.py`` and a ``.dist-info`` whose ``RECORD`` holds each member's sha256.
``libtorch_cuda.so`` is 2 MiB of incompressible bytes, so a reader that fetched it (or
merged it into a neighbouring range) shows in the bytes the server sent.

:class:`PackageIndex` puts the wheels on a :class:`~tests.support.faulty_http.FaultyServer`
with a project page per project, PEP 691 JSON (``/simple/<project>/``, URLs relative to
the page, as PyPI answers) or PEP 503 HTML (relative links with ``#sha256=``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import random
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fdl.binaries.synthetic import build_elf
from tests.support.faulty_http import FaultyServer

__all__ = [
    "CPU_LIBRARY",
    "CUDA_ONLY",
    "CUPTI_WHEEL",
    "GLIBC",
    "NVIDIA",
    "RUNTIME_WHEEL",
    "TORCH",
    "TORCH_WHEEL",
    "PackageIndex",
    "Wheel",
    "nvidia_wheel",
    "record_line",
    "torch_members",
    "torch_wheel",
    "wheel_bytes",
]

TORCH = "2.10.0"
TORCH_WHEEL = f"torch-{TORCH}-cp311-cp311-manylinux_2_28_x86_64.whl"
RUNTIME_WHEEL = (
    "nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
)
CUPTI_WHEEL = (
    "nvidia_cuda_cupti_cu12-12.8.90-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
)
GLIBC = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1")
# (project, wheel, member, soname): the NVIDIA libraries libtorch_cpu.so needs
NVIDIA = (
    ("nvidia-cuda-runtime-cu12", RUNTIME_WHEEL, "nvidia/cuda_runtime/lib", "libcudart.so.12"),
    ("nvidia-cuda-cupti-cu12", CUPTI_WHEEL, "nvidia/cuda_cupti/lib", "libcupti.so.12"),
)
CUDA_ONLY = 2 << 20  # libtorch_cuda.so's size: more than the reader's 1 MiB gap
# libtorch_cpu.so's size (half random): the only range read of more than 128 KiB
CPU_LIBRARY = 400_000


def _library(soname: str, needed: Sequence[str], size: int = 40_000, seed: int = 0) -> bytes:
    """An ELF library with ``needed`` in DT_NEEDED and ``size`` bytes of text (half of them
    random, so the member is not all zeros when deflated)."""
    noise = random.Random(f"{soname}:{seed}").randbytes(size // 2)
    text = noise + bytes(size - len(noise))
    # libc10.so's mangled names tell the C++ ABI (std::__cxx11::basic_string)
    rodata = b"_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv\0"
    return build_elf({".text": text, ".rodata": rodata}, needed=needed, soname=soname)


def torch_members(
    version: str = TORCH, *, cuda: str | None = "12.8", seed: int = 0
) -> dict[str, bytes]:
    """The members of a torch wheel, RECORD last (in the order the zip holds them).

    ``cuda`` None: a CPU wheel (``+cpu``; no libtorch_cuda.so, no NVIDIA requirements).
    ``seed`` changes the libraries' bytes (another build of the same release).
    """
    release = version.split("+", 1)[0]
    info = f"torch-{version}.dist-info"
    cpu_needs = ["libc10.so", "libgomp.so.1"]
    if cuda:
        cpu_needs += ["libcudart.so.12", "libcupti.so.12"]
    torch_needs = ["libtorch_cpu.so", "libc10.so"] + (["libtorch_cuda.so"] if cuda else [])
    members: dict[str, bytes] = {
        "torch/__init__.py": b"",
        "torch/include/torch/x.h": b"#pragma once\nint torch_x();\n",
        "torch/include/c10/macros/Macros.h": b"#pragma once\n#define C10_API\n",
        "torch/lib/libc10.so": _library("libc10.so", GLIBC, seed=seed),
        "torch/lib/libgomp.so.1": _library("libgomp.so.1", GLIBC[:3], 8_000, seed),
        "torch/lib/libtorch.so": _library("libtorch.so", [*torch_needs, *GLIBC], 2_000, seed),
        "torch/lib/libtorch_cpu.so": _library(
            "libtorch_cpu.so", [*cpu_needs, *GLIBC], CPU_LIBRARY, seed
        ),
    }
    if cuda:
        blob = random.Random(f"cuda:{seed}").randbytes(CUDA_ONLY)
        members["torch/lib/libtorch_cuda.so"] = build_elf(
            {".nv_fatbin": blob},
            needed=["libc10.so", "libcudart.so.12", "libcublas.so.12", *GLIBC],
            soname="libtorch_cuda.so",
        )
    members["torch/lib/libtorch_python.so"] = _library(
        "libtorch_python.so", ["libtorch.so", *GLIBC], 4_000, seed
    )
    cmake = "torch/share/cmake/"
    members[cmake + "Caffe2/Caffe2Config.cmake"] = b"find_package(CUDAToolkit REQUIRED)\n"
    members[cmake + "Torch/TorchConfig.cmake"] = b"# the wheel's TorchConfig.cmake\n"
    members[cmake + "Torch/TorchConfigVersion.cmake"] = (
        f'set(PACKAGE_VERSION "{release}")\n# the wheel\'s own version file\n'.encode()
    )
    members["torch/version.py"] = (
        "from typing import Optional\n"
        f"__version__ = '{version}'\ndebug = False\n"
        f"cuda: Optional[str] = {repr(cuda) if cuda else 'None'}\n"
        "git_version = '0123456789abcdef0123456789abcdef01234567'\nhip = None\n"
    ).encode()
    requires = ["filelock", "typing-extensions>=4.10.0"]
    if cuda:
        requires += [
            'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',
            'nvidia-cuda-cupti-cu12==12.8.90; platform_system == "Linux"',
            'nvidia-cublas-cu12==12.8.4.1; platform_system == "Linux"',
        ]
    members[f"{info}/METADATA"] = (
        "Metadata-Version: 2.4\nName: torch\n"
        f"Version: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    ).encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
    members[f"{info}/RECORD"] = record(members, f"{info}/RECORD")
    return members


def record_line(name: str, data: bytes) -> str:
    """One RECORD line: the name, ``sha256=`` urlsafe base64 without padding, the size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def record(members: Mapping[str, bytes], own: str) -> bytes:
    lines = [record_line(name, data) for name, data in members.items()]
    return ("\n".join([*lines, f"{own},,"]) + "\n").encode()


def wheel_bytes(members: Mapping[str, bytes], *, stored: Sequence[str] = ()) -> bytes:
    """A zip of ``members`` in their order, deflated but for those named in ``stored``."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            method = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            archive.writestr(name, data, compress_type=method)
    return out.getvalue()


def torch_wheel(
    version: str = TORCH, *, cuda: str | None = "12.8", seed: int = 0, stored: Sequence[str] = ()
) -> bytes:
    return wheel_bytes(torch_members(version, cuda=cuda, seed=seed), stored=stored)


def nvidia_wheel(project: str, version: str, directory: str, soname: str) -> bytes:
    """An NVIDIA wheel holding one library (and its dist-info)."""
    dist = project.replace("-", "_")
    library = _library(soname, GLIBC[:1], 16_000)
    package = directory.rsplit("/", 1)[0]
    members = {
        f"{package}/__init__.py": b"",
        f"{directory}/{soname}": library,
        f"{dist}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
        ).encode(),
    }
    members[f"{dist}-{version}.dist-info/RECORD"] = record(
        members, f"{dist}-{version}.dist-info/RECORD"
    )
    return wheel_bytes(members)


@dataclass
class Wheel:
    """A file the index lists: its name, bytes, and how the page shows it."""

    filename: str
    data: bytes
    yanked: bool = False
    listed_sha256: str | None = None  # None: the file's own

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class PackageIndex:
    """Projects and their files on ``server``: ``/simple/<project>/`` and ``/files/<name>``.

    ``form`` is ``json`` (PEP 691, relative URLs ``../../files/<name>``) or ``html``
    (PEP 503, relative links with ``#sha256=``).
    """

    server: FaultyServer
    form: str = "json"
    projects: dict[str, list[Wheel]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url("/simple")

    def page_path(self, project: str) -> str:
        return f"/simple/{project}/"

    @staticmethod
    def file_path(filename: str) -> str:
        return f"/files/{filename}"

    def add(self, project: str, *wheels: Wheel) -> None:
        self.projects.setdefault(project, []).extend(wheels)
        for wheel in wheels:
            self.server.add(self.file_path(wheel.filename), wheel.data)
        self.publish(project)

    def publish(self, project: str) -> None:
        files = self.projects[project]
        if self.form == "json":
            body = json.dumps(
                {
                    "meta": {"api-version": "1.1"},
                    "name": project,
                    "files": [
                        {
                            "filename": w.filename,
                            "url": f"../../files/{w.filename}",
                            "hashes": {"sha256": w.listed_sha256 or w.sha256},
                            "size": len(w.data),
                            "requires-python": ">=3.10",
                            "yanked": w.yanked,
                        }
                        for w in files
                    ],
                }
            ).encode()
            kind = "application/vnd.pypi.simple.v1+json"
        else:
            links = "".join(
                f'<a href="../../files/{html.escape(w.filename)}#sha256='
                f'{w.listed_sha256 or w.sha256}" data-requires-python="&gt;=3.10"'
                f"{' data-yanked' if w.yanked else ''}>{html.escape(w.filename)}</a><br/>\n"
                for w in files
            )
            body = (
                f"<!DOCTYPE html><html><body><h1>Links for {project}</h1>\n{links}</body></html>"
            ).encode()
            kind = "text/html"
        self.server.add(self.page_path(project), body, content_type=kind)

    def add_torch(self, wheel: bytes | None = None, *, filename: str = TORCH_WHEEL) -> Wheel:
        """torch 2.10.0 (``wheel``, else a CUDA 12.8 build) beside other releases and
        platforms, and the NVIDIA wheels it pins."""
        chosen = Wheel(filename, wheel if wheel is not None else torch_wheel())
        others = [
            Wheel("torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl", b"not read"),
            Wheel(f"torch-{TORCH}-cp311-cp311-manylinux_2_28_aarch64.whl", b"not read"),
            Wheel(f"torch-{TORCH}-cp311-none-macosx_11_0_arm64.whl", b"not read"),
        ]
        self.add("torch", *others, chosen)
        for project, name, directory, soname in NVIDIA:
            self.add(project, Wheel(name, nvidia_wheel(project, "12.8.90", directory, soname)))
        return chosen

    def paths(self) -> set[str]:
        """Every path the index serves."""
        found = {self.page_path(p) for p in self.projects}
        return found | {self.file_path(w.filename) for ws in self.projects.values() for w in ws}
