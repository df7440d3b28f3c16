"""Whether a variant is self-contained: the libraries torch's libraries load.

Every DT_NEEDED of torch's own libraries must resolve inside the variant (``lib/``) or in
the system's library directories, as the dynamic loader would resolve it; the NVIDIA
container runtime's libraries (``libcuda.so.1``) are skipped. Libraries a CUDA build loads
with ``dlopen`` (cuDNN's parts, NVRTC's builtins) are looked for by name.
"""

from __future__ import annotations

from pathlib import Path

from fdl.binaries import SYSTEM_DIRS, BinaryFormatError, dependency_closure
from fdl.checks import Check, Severity
from fdl.compat import injected_libraries, runtime_libraries
from fdl.errors import FdlError
from fdl.libtorch import variants
from fdl.libtorch._install import InstallResult
from fdl.libtorch._scan import torch_libraries

__all__ = ["library_checks", "unresolved_libraries"]


def _dlopened(info: variants.VariantInfo, lib_dir: Path) -> list[str]:
    """What the variant's CUDA libraries in ``lib/`` load with dlopen, except those of a
    library fdl copied from its NVIDIA wheel: every library of that wheel was copied, so a
    part that is absent is one its release does not ship (cuDNN 9.10 has fewer than
    9.13), not one that is missing. (A library not in ``lib/`` at all is the dependency
    check's.)"""
    if not info.cuda:
        return []
    bundled = info.extra.get("nvidia_libraries") or {}
    copied = {
        str(name)
        for package in bundled.get("packages") or ()
        if isinstance(package, dict)
        for name in package.get("libraries") or ()
    }
    try:
        libraries = runtime_libraries(info.cuda)
    except FdlError:
        return []
    return [
        name
        for lib in libraries
        if any((lib_dir / soname).exists() for soname in lib.sonames)
        and not copied.intersection(lib.sonames)
        for name in lib.dlopened
    ]


def _directory_fix(missing: list[str], info: variants.VariantInfo) -> str | None:
    """A tree adopted from a pip-installed torch lacks what NVIDIA's wheels put beside it
    (site-packages/nvidia/...): name those wheels and the install that brings them."""
    if info.source.get("kind") != "directory" or not info.cuda:
        return None
    from fdl.compat.runtime import library_for_soname

    try:
        found = [library_for_soname(name, info.cuda) for name in missing]
    except FdlError:  # no run-time table for this CUDA
        return None
    wheels = sorted({lib.wheel for lib in found if lib is not None and lib.wheel})
    if not wheels:
        return None
    return (
        f"they come from NVIDIA's wheels ({', '.join(wheels)}), which pip installs beside "
        "torch, not inside it: install from that Python instead, which brings them: fdl "
        "libtorch install --from-wheel --python PATH/TO/python --force (or --torch VERSION "
        "for a download)"
    )


def library_checks(path: Path, info: variants.VariantInfo) -> list[Check]:
    """Every DT_NEEDED of torch's libraries resolves; dlopen()ed CUDA libraries are present."""
    lib_dir = path / "lib"
    skip = set(injected_libraries())
    missing: dict[str, str] = {}
    outside: set[str] = set()
    for library in torch_libraries(lib_dir):
        try:
            closure = dependency_closure(library, [lib_dir], skip=skip)
        except BinaryFormatError as exc:
            missing[library.name] = exc.message
            continue
        for name, needed_by in closure.missing:
            missing.setdefault(name, Path(needed_by).name)
        for _name, found in closure.found:
            if not found.is_relative_to(path) and str(found.parent) not in SYSTEM_DIRS:
                outside.add(str(found))
    checks = []
    if missing:
        listed = ", ".join(f"{n} (needed by {by})" for n, by in sorted(missing.items()))
        wheel = info.source.get("kind") == "wheel"
        pulled = info.source.get("registry")
        if isinstance(pulled, dict):  # the puller never chose how it was installed
            fix = (
                f"it was pushed without them ({pulled.get('reference')}): on the machine that "
                "pushed it, complete it (fdl libtorch verify there) and push it again, then "
                "pull that; or install another variant (fdl setup)"
            )
        elif wheel:
            fix = (
                "reinstall with its NVIDIA libraries: fdl libtorch install --from-wheel ... "
                "--force (without --no-nvidia)"
            )
        else:
            fix = _directory_fix(sorted(missing), info) or (
                "reinstall the variant; the archive was incomplete"
            )
        checks.append(
            Check(
                "libraries",
                "dependencies",
                Severity.ERROR,
                f"{len(missing)} libraries cannot be found: {listed}",
                fix,
                {"missing": sorted(missing)},
            )
        )
    else:
        checks.append(
            Check(
                "libraries",
                "dependencies",
                Severity.OK,
                "every library torch needs resolves (inside the variant or the system)",
            )
        )
    if outside:
        checks.append(
            Check(
                "libraries",
                "outside",
                Severity.INFO,
                f"found outside the variant: {', '.join(sorted(outside))}",
            )
        )
    absent = [p for p in _dlopened(info, lib_dir) if not any(lib_dir.glob(p))]
    if absent and not missing:
        checks.append(
            Check(
                "libraries",
                "dlopened",
                Severity.WARNING,
                f"loaded at run time but not in lib/: {', '.join(absent)}",
                "they must be on LD_LIBRARY_PATH when the program runs",
            )
        )
    return checks


def unresolved_libraries(result: InstallResult) -> list[Check]:
    """The errors of a fresh variant whose libraries need something it does not contain."""
    if not result.installed:
        return []
    checks = library_checks(result.target.path, result.info)
    return [c for c in checks if c.severity is Severity.ERROR]
