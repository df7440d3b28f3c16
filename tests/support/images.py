"""Projects and libtorch variants for the image tests.

``make_project`` copies the C++ training program (tests/fixtures/cpp-train) and
writes a manifest; ``make_variant`` writes a variant's ``variant.json`` (no
libraries: enough for planning and rendering); ``cpu_variant_from_wheel``
materialises a real CPU libtorch from the local torch wheel (for builds).
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from pathlib import Path

from fdl.libtorch.variants import VariantInfo, write_info

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "cpp-train"
CPU_WHEEL = Path(
    os.environ.get(
        "FDL_TEST_CPU_WHEEL", "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
)
FIXED_TIME = "2025-01-01T00:00:00Z"
# Wheel members a libtorch needs; the Python bindings and extension modules stay out.
_KEEP = ("torch/lib/", "torch/include/", "torch/share/")
_DROP = ("libtorch_python.so",)


def make_variant(
    project: Path,
    name: str = "precompiled/cpu",
    *,
    torch: str = "2.13.0",
    cuda: str | None = None,
    cudnn: str | None = None,
    archs: tuple[str, ...] = (),
    active: bool = True,
) -> Path:
    """A variant directory with ``lib/`` and ``variant.json`` only."""
    directory = project / "libtorch" / name
    (directory / "lib").mkdir(parents=True, exist_ok=True)
    write_info(
        directory,
        VariantInfo(
            name=name,
            torch=torch,
            cuda=cuda,
            cudnn=cudnn,
            archs_requested=list(archs),
            abi="cxx11",
            source={"kind": "wheel" if cuda is None else "download"},
            installed_at=FIXED_TIME,
        ),
    )
    if active:
        (project / "libtorch" / ".active").write_text(name + "\n", encoding="utf-8")
    return directory


def make_project(root: Path, manifest: str, *, name: str = "cpp-train") -> Path:
    """The C++ training program under ``root/name`` with ``manifest`` as its fdl.yml."""
    project = root / name
    shutil.copytree(FIXTURE, project)
    (project / "fdl.yml").write_text(manifest, encoding="utf-8")
    return project


def cpu_variant_from_wheel(target: Path, wheel: Path = CPU_WHEEL) -> Path:
    """Unzip the wheel's C++ distribution into ``target`` as variant ``precompiled/cpu``.

    The tree (about 460 MB) is what ``fdl libtorch install --from-wheel`` makes:
    lib/, include/, share/ without libtorch_python.so, plus variant.json.
    """
    directory = target / "precompiled" / "cpu"
    if (directory / "variant.json").is_file():
        return directory
    partial = target / ".partial-cpu"
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if not name.startswith(_KEEP) or name.endswith("/"):
                continue
            if Path(name).name in _DROP:
                continue
            relative = name.removeprefix("torch/")
            destination = partial / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, destination.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
            mode = member.external_attr >> 16
            if mode & stat.S_IXUSR:
                destination.chmod(0o755)
    write_info(
        partial,
        VariantInfo(
            name="precompiled/cpu",
            torch="2.13.0",
            abi="cxx11",
            source={"kind": "wheel", "wheel": wheel.name},
            installed_at=FIXED_TIME,
        ),
    )
    directory.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(directory)
    return directory


def link_variant(source: Path, project: Path, name: str = "precompiled/cpu") -> Path:
    """Hard-link an installed variant into a project's libtorch directory (fast, no copy)."""
    directory = project / "libtorch" / name
    directory.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, directory, copy_function=os.link)
    (project / "libtorch" / ".active").write_text(name + "\n", encoding="utf-8")
    return directory
