"""Projects and libtorch variants for the image tests.

``make_project`` copies the C++ training program (tests/fixtures/cpp-train) and
writes a manifest; ``make_variant`` writes a variant's ``variant.json`` (no
libraries: enough for planning and rendering); ``cpu_variant_from_wheel``
installs a real CPU libtorch, the CPU view of PyPI's torch wheel (for builds).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fdl.libtorch.variants import VariantInfo, write_info
from tests.support.cpu_view import install_cpu_view

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "cpp-train"
FIXED_TIME = "2025-01-01T00:00:00Z"


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


def cpu_variant_from_wheel(target: Path) -> Path:
    """A real CPU libtorch 2.13.0 under ``target`` (``home/libtorch/precompiled/cpu``): the
    CPU view of PyPI's wheel, installed by the fdl under test through the tests' cache
    (tests/support/cpu_view.py). About 460 MB; link it into projects with
    :func:`link_variant`."""
    directory = target / "home" / "libtorch" / "precompiled" / "cpu"
    if (directory / "variant.json").is_file():
        return directory
    target.mkdir(parents=True, exist_ok=True)
    return install_cpu_view(target, home=target / "home")


def link_variant(source: Path, project: Path, name: str = "precompiled/cpu") -> Path:
    """Hard-link an installed variant into a project's libtorch directory (fast, no copy)."""
    directory = project / "libtorch" / name
    directory.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, directory, copy_function=os.link)
    (project / "libtorch" / ".active").write_text(name + "\n", encoding="utf-8")
    return directory
