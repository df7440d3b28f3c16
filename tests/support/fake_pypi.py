"""A fake PyPI for the refresh tool's tests (``/pypi/<project>/json`` and the files, on a
:class:`~tests.support.faulty_http.FaultyServer`): every torch release and CUDA toolkit
fdl's tables know, as the tables say, plus planted drift (see :func:`publish`)."""

from __future__ import annotations

import io
import json
import zipfile

from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin
from fdl.compat import releases, toolkits
from tests.support.faulty_http import FaultyServer

__all__ = ["publish", "torch_wheel"]

METADATA = """Metadata-Version: 2.1
Name: torch
Version: {version}
Requires-Python: >=3.11
Requires-Dist: cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"
Requires-Dist: nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"
"""


def torch_wheel(version: str, *, gpu: bool) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        if gpu:
            fatbin = build_fatbin(
                [
                    [FakeEntry("cubin", 75), FakeEntry("cubin", 90), FakeEntry("cubin", 120)],
                    [FakeEntry("cubin", 75), FakeEntry("cubin", 90), FakeEntry("cubin", 120)],
                    [FakeEntry("ptx", 120)],
                    [FakeEntry("ptx", 120)],
                ]
            )
            wheel.writestr(
                "torch/lib/libtorch_cuda.so",
                build_elf({".text": b"\x90" * 4000, ".nv_fatbin": fatbin}),
            )
        wheel.writestr(f"torch-{version}.dist-info/METADATA", METADATA.format(version=version))
    return buffer.getvalue()


def _file(
    server: FaultyServer, name: str, data: bytes, python: str | None, **extra: object
) -> dict[str, object]:
    return {
        "filename": name,
        "url": server.add(f"/files/{name}", data),
        "requires_python": python,
        "yanked": False,
        **extra,
    }


def publish(server: FaultyServer) -> None:
    """torch 2.15.0 asking Python >= 3.12 (cp312-cp313), a patch 2.15.1, a new minor 2.16.0
    (METADATA pins CUDA 13.2 and cuDNN 9.26.0.51, a libtorch_cuda.so with sm_75, sm_90,
    sm_120 and PTX 120), a pre-release and a yanked release; cuda-toolkit without 13.4.3,
    with 13.5.1, 13.0.3 and 13.6.0; nvidia-cuda-nvcc 13.6.20."""
    torch: dict[str, list[dict[str, object]]] = {}
    for rel in releases():
        for patch in rel.patches:
            python = ">=3.12" if patch == "2.15.0" else f">={rel.source.python_min}"
            tags = ("cp312", "cp313") if patch == "2.15.0" else ("cp311",)
            torch[patch] = [
                _file(server, f"torch-{patch}-{t}-{t}-manylinux_2_28_x86_64.whl", b"x", python)
                for t in tags
            ]
    torch["2.15.1"] = [
        _file(server, "torch-2.15.1-cp312-cp312-manylinux_2_28_x86_64.whl", b"x", ">=3.12")
    ]
    for tag in ("cp311", "cp312", "cp315"):
        name = f"torch-2.16.0-{tag}-{tag}-manylinux_2_28_x86_64.whl"
        torch.setdefault("2.16.0", []).append(
            _file(server, name, torch_wheel("2.16.0", gpu=tag == "cp311"), ">=3.11")
        )
    torch["2.17.0rc1"] = [
        _file(server, "torch-2.17.0rc1-cp312-cp312-manylinux_2_28_x86_64.whl", b"", ">=3.12")
    ]
    torch["2.18.0"] = [
        _file(
            server, "torch-2.18.0-cp312-cp312-manylinux_2_28_x86_64.whl", b"", ">=3.12", yanked=True
        )
    ]
    toolkit: dict[str, list[dict[str, object]]] = {}
    for kit in toolkits():
        if kit.version != "13.4":
            toolkit[kit.image.version] = [
                _file(server, f"cuda_toolkit-{kit.image.version}.whl", b"", None)
            ]
    for version in ("13.4.0rc1", "13.4.1", "13.5.1", "13.0.3", "13.6.0"):
        toolkit[version] = [_file(server, f"cuda_toolkit-{version}.whl", b"", None)]
    nvcc = {"13.6.20": [_file(server, "nvidia_cuda_nvcc-13.6.20.whl", b"", None)]}
    for project, listed in (
        ("torch", torch),
        ("cuda-toolkit", toolkit),
        ("nvidia-cuda-nvcc", nvcc),
    ):
        body = json.dumps({"info": {"name": project}, "releases": listed}).encode()
        server.add(f"/pypi/{project}/json", body, content_type="application/json")
