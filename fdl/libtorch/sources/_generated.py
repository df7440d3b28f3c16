"""The files fdl writes into a variant it makes from a wheel: ``build-version`` and
``build-hash`` (every wheel source), and, for the CPU view of a CUDA wheel, its CMake
package (``TorchConfig.cmake``, ``TorchConfigVersion.cmake``) and the GNU ld script
``lib/libtorch.so``. The text is in template files (``fdl/data/libtorch/*.in``,
:func:`fdl.formats.templates.render`); every value passes the grammar of the file it
goes into.
"""

from __future__ import annotations

from pathlib import Path

from fdl._grammar import checked, fill
from fdl.errors import EnvironmentProblem, FdlError
from fdl.formats.templates import render

__all__ = [
    "LINK_SCRIPT_MARK",
    "check_wheel_facts",
    "write_build_files",
    "write_cmake_package",
    "write_link_script",
]

# How a CPU view's lib/libtorch.so (the linker script) starts.
LINK_SCRIPT_MARK = b"/* fdl: CPU view"
_VERSION_FILE = "TorchConfigVersion.cmake"


def check_wheel_facts(
    version: str,
    cuda: str | None,
    git_version: str | None,
    *,
    source: str,
    hint: str,
    release: str | None = None,
    error: type[FdlError] = EnvironmentProblem,
) -> None:
    """A wheel's version (and the ``release`` it was asked as), and ``version.py``'s CUDA
    and commit, held against their grammars where they are read, before any of them is
    written into the variant: text from a wheel or an index never becomes code.

    Raises:
        FdlError: ``error`` (EnvironmentProblem for a local file, NetworkError for what an
            index served), naming the fact and ``source``.
    """
    facts = [("torch-version", "its version", version)]
    if release is not None:
        facts.append(("torch-version", "its release", release))
    if cuda:
        facts.append(("cuda", "version.py's cuda", cuda))
    if git_version:
        facts.append(("commit", "version.py's git_version", git_version))
    for kind, what, value in facts:
        checked(kind, value, what=what, source=source, hint=hint, error=error)


def write_build_files(
    tree: Path, build_version: str, git_version: str | None, *, source: str, hint: str
) -> None:
    """``build-version`` and (with a commit) ``build-hash``: one line each."""
    line = fill("line", "{build_version}\n", build_version=build_version, source=source, hint=hint)
    (tree / "build-version").write_text(line, encoding="utf-8")
    if git_version:
        line = fill("line", "{git_version}\n", git_version=git_version, source=source, hint=hint)
        (tree / "build-hash").write_text(line, encoding="utf-8")


def write_link_script(lib_dir: Path, build: str, *, source: str, hint: str) -> None:
    """``lib/libtorch.so`` for the linkers of programs that link ``-ltorch`` (tch-rs's
    torch-sys, floDl, most hand-written build scripts)."""
    text = render("libtorch/libtorch.so.ld.in", "linker", build=build, source=source, hint=hint)
    (lib_dir / "libtorch.so").write_text(text, encoding="utf-8")


def write_cmake_package(tree: Path, build: str, torch: str, *, source: str, hint: str) -> None:
    """``share/cmake/Torch/TorchConfig.cmake`` for a CPU view's tree (its ABI read from
    its libraries), and ``TorchConfigVersion.cmake`` where the wheel's own is missing."""
    from fdl.libtorch._scan import detect_abi

    folder = tree / "share" / "cmake" / "Torch"
    folder.mkdir(parents=True, exist_ok=True)
    abi = "0" if detect_abi(tree) == "pre-cxx11" else "1"
    how = {"source": source, "hint": hint}
    text = render("libtorch/TorchConfig.cmake.in", "cmake", build=build, abi=abi, **how)
    (folder / "TorchConfig.cmake").write_text(text, encoding="utf-8")
    if not (folder / _VERSION_FILE).is_file():
        text = render("libtorch/TorchConfigVersion.cmake.in", "cmake", torch=torch, **how)
        (folder / _VERSION_FILE).write_text(text, encoding="utf-8")
