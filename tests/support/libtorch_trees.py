"""Small fake libtorch trees, zips and wheels for tests (valid ELF files, real fatbins).

A tree has the official layout (``lib/``, ``include/``, ``share/cmake/Torch``,
``build-version``); its libraries are tiny ELF files that :mod:`fdl.binaries` reads like the
real ones: DT_NEEDED entries, a cxx11 marker in libc10, and for CUDA trees a
``.nv_fatbin`` section in ``libtorch_cuda.so`` with the requested cubins and PTX.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from pathlib import Path

from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin

__all__ = ["cuda_entries", "libtorch_zip", "make_tree", "torch_wheel", "tree_files"]


def cuda_entries(
    cubins: Sequence[int], ptx: Sequence[int] = (), copies: int = 4
) -> list[FakeEntry]:
    """Fatbin entries: ``copies`` kernels for each cubin arch (so they count as primary)."""
    entries = [FakeEntry("cubin", arch) for arch in cubins for _ in range(copies)]
    entries += [FakeEntry("ptx", arch) for arch in ptx for _ in range(copies)]
    return entries


def tree_files(
    version: str = "2.13.0+cpu",
    *,
    cubins: Sequence[int] = (),
    ptx: Sequence[int] = (),
    cuda_needed: Sequence[str] = ("libcudart.so.13",),
    extra_libs: dict[str, bytes] | None = None,
) -> dict[str, bytes]:
    """Relative path -> content of a fake libtorch tree."""
    cuda = bool(cubins or ptx)
    files: dict[str, bytes] = {
        "lib/libc10.so": build_elf(
            {".rodata": b"_ZNSt7__cxx1112basic_stringIcE\0"}, soname="libc10.so"
        ),
        "lib/libtorch_cpu.so": build_elf(needed=["libc10.so"], soname="libtorch_cpu.so"),
        "lib/libtorch.so": build_elf(
            needed=["libtorch_cpu.so", *(["libtorch_cuda.so"] if cuda else [])],
            soname="libtorch.so",
            runpath=["$ORIGIN"],
        ),
        "include/torch/csrc/api/include/torch/torch.h": b"// fake\n",
        "share/cmake/Torch/TorchConfig.cmake": b"# fake\n",
        "build-version": f"{version}\n".encode(),
        "build-hash": b"0123456789abcdef\n",
    }
    if cuda:
        fatbin = build_fatbin([cuda_entries(cubins, ptx)])
        files["lib/libtorch_cuda.so"] = build_elf(
            {".nv_fatbin": fatbin},
            needed=["libc10.so", *cuda_needed],
            soname="libtorch_cuda.so",
            runpath=["$ORIGIN"],
        )
    files.update(extra_libs or {})
    return files


def make_tree(root: Path, version: str = "2.13.0+cpu", **kwargs: object) -> Path:
    """Write a fake libtorch tree at ``root``."""
    for relative, content in tree_files(version, **kwargs).items():  # type: ignore[arg-type]
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


def libtorch_zip(version: str = "2.13.0+cpu", *, top: str = "libtorch", **kwargs: object) -> bytes:
    """An official-looking libtorch zip: ``libtorch/{lib,include,share,build-version,...}``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for relative, content in sorted(tree_files(version, **kwargs).items()):  # type: ignore[arg-type]
            archive.writestr(f"{top}/{relative}", content)
    return buffer.getvalue()


def torch_wheel(
    path: Path,
    version: str = "2.13.0+cpu",
    *,
    cuda: str | None = None,
    requires: Sequence[str] = (),
    **kwargs: object,
) -> Path:
    """A fake torch wheel at ``path`` (METADATA, torch/version.py, torch/{lib,include,share})."""
    files = tree_files(version, **kwargs)  # type: ignore[arg-type]
    files.pop("build-version")
    files.pop("build-hash")
    files["lib/libtorch_python.so"] = build_elf(needed=["libtorch.so"], soname="libtorch_python.so")
    metadata = "Metadata-Version: 2.1\nName: torch\nVersion: " + version + "\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    version_py = (
        f"__version__ = '{version}'\ndebug = False\n"
        f"cuda: Optional[str] = {repr(cuda) if cuda else 'None'}\n"
        "git_version = 'feedfacecafe'\n"
    )
    members: dict[str, str | bytes] = {f"torch/{k}": v for k, v in sorted(files.items())}
    members["torch/__init__.py"] = ""
    members["torch/version.py"] = version_py
    members["torch/_C.cpython-311-x86_64-linux-gnu.so"] = b"\x7fELF"
    members[f"torch-{version}.dist-info/METADATA"] = metadata
    members[f"torch-{version}.dist-info/WHEEL"] = "Wheel-Version: 1.0\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        archive.writestr(f"torch-{version}.dist-info/RECORD", wheel_record(members))
    return path


def wheel_record(members: dict[str, str | bytes]) -> str:
    """A wheel's RECORD: each member's sha256 (urlsafe base64, unpadded) and size."""
    import base64
    import hashlib

    lines = []
    for name, content in members.items():
        data = content.encode() if isinstance(content, str) else content
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    return "\n".join(lines) + "\n"
