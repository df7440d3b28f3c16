"""A libtorch source build for AMD GPUs, planned and preflighted: ``fdl libtorch build
--rocm-archs "gfx906;gfx1100"``.

PyTorch builds for ROCm from the same tree as for CUDA: ``tools/amd_build/build_amd.py``
hipifies the sources, then ``tools/build_libtorch.py`` builds with ``USE_ROCM=1`` for the
processors ``PYTORCH_ROCM_ARCH`` lists. What it needs of the machine (``rocm.yaml``'s
``source_build``, with its sources): a ROCm installation whose CMake configurations hold
every component PyTorch's ``LoadHIP.cmake`` requires, device libraries for each processor
(``oclc_isa_version_<gfx>.bc``), and the compilers. The stages follow the CUDA planner's:
facts are gathered once (:func:`rocm_build_facts`), the plan is pure (:func:`plan_rocm_build`).
fdl does not run this build yet: the plan says what to run and what is missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl.compat.rocm import gfx_processor, gfx_sort_key, parse_gfx
from fdl.errors import UsageError

__all__ = [
    "RocmBuildFacts",
    "RocmBuildPlan",
    "parse_rocm_archs",
    "plan_rocm_build",
    "rocm_build_facts",
]

_ISA = re.compile(r"^oclc_isa_version_([0-9a-f]{3,5})\.bc$")
_ROOT_ENV = ("ROCM_PATH", "HIP_PATH")
# Where a ROCm installation keeps its CMake configurations and device libraries (ROCm's own
# layout under /opt/rocm, and Debian's packages under /usr).
_CMAKE_DIRS = ("lib/cmake", "lib/x86_64-linux-gnu/cmake", "lib64/cmake", "share/cmake")
_BITCODE_DIRS = ("amdgcn/bitcode", "lib/x86_64-linux-gnu/amdgcn/bitcode", "lib/llvm/amdgcn/bitcode")
_COMPILERS = ("bin/hipcc", "bin/amdclang++", "llvm/bin/clang++", "lib/llvm/bin/clang++")


@dataclass(frozen=True)
class RocmBuildFacts:
    """What this machine has for a ROCm build (gathered once).

    Attributes:
        root: The ROCm installation looked at (``$ROCM_PATH``, ``/opt/rocm``, Debian's ``/usr``).
        packages: Component -> the directory of its ``<name>-config.cmake``.
        isas: The processors the device libraries have code for (``gfx90a``).
        compiler: The HIP compiler found, if any.
        source: The ``--source`` tree, when given (its release read from ``version.txt``).
    """

    root: str | None
    packages: Mapping[str, str]
    isas: frozenset[str]
    compiler: str | None
    source_release: str | None = None


@dataclass(frozen=True)
class RocmBuildPlan:
    """The build, and every problem that stops it here (each with its fix)."""

    torch: str
    archs: tuple[str, ...]
    env: dict[str, str]
    steps: tuple[tuple[str, ...], ...]
    facts: RocmBuildFacts
    problems: tuple[tuple[str, str], ...] = field(default=())

    @property
    def ready(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "torch": self.torch,
            "vendor": "amd",
            "archs": list(self.archs),
            "env": self.env,
            "steps": [list(s) for s in self.steps],
            "rocm_root": self.facts.root,
            "compiler": self.facts.compiler,
            "packages_found": dict(self.facts.packages),
            "device_libraries": _sorted(self.facts.isas),
            "problems": [{"problem": p, "fix": f} for p, f in self.problems],
            "ready": self.ready,
            "runs": False,
        }


def parse_rocm_archs(text: str) -> tuple[str, ...]:
    """``"gfx906;gfx1100"`` (``;``, ``,`` or spaces) as distinct gfx processors.

    Raises:
        UsageError: an entry that is not a gfx processor, or none at all.
    """
    parts = [p.strip().lower() for p in re.split(r"[;,\s]+", text) if p.strip()]
    if not parts:
        raise UsageError(
            "--rocm-archs needs gfx processors", hint='e.g. --rocm-archs "gfx90a;gfx1100"'
        )
    for part in parts:
        target = parse_gfx(part)
        if target is None or target.features:
            raise UsageError(
                f"--rocm-archs: {part[:40]!r} is not an AMD GPU processor (gfx906, gfx90a, gfx1100)",
                hint="list the processors (target features such as :xnack- are left to PyTorch)",
            )
    return tuple(dict.fromkeys(parts))


def rocm_build_facts(environ: Mapping[str, str], source: Path | None = None) -> RocmBuildFacts:
    """The ROCm installation this machine has, read from its files (nothing is run)."""
    from fdl.compat import load_table

    wanted = load_table("rocm")["source_build"]
    names = [*wanted["packages"], *wanted["optional"]]
    roots = [environ[k] for k in _ROOT_ENV if environ.get(k)] + ["/opt/rocm", "/usr"]
    root = next((r for r in roots if _has_rocm(Path(r))), None)
    packages: dict[str, str] = {}
    isas: set[str] = set()
    compiler = None
    if root is not None:
        base = Path(root)
        for name in names:
            for sub in _CMAKE_DIRS:
                folder = base / sub / name
                if (folder / f"{name}-config.cmake").is_file() or (
                    folder / f"{name}Config.cmake"
                ).is_file():
                    packages[name] = str(folder)
                    break
        for sub in _BITCODE_DIRS:
            try:
                isas |= {
                    gfx_processor(f"gfx{m.group(1)}")
                    for p in (base / sub).iterdir()
                    if (m := _ISA.match(p.name))
                } - {""}
            except OSError:
                continue
        compiler = next((str(base / c) for c in _COMPILERS if (base / c).is_file()), None)
    return RocmBuildFacts(root, packages, frozenset(isas), compiler, _source_release(source))


def _has_rocm(root: Path) -> bool:
    return (
        any((root / sub / "hip").is_dir() for sub in _CMAKE_DIRS)
        or (root / "bin" / "hipcc").is_file()
    )


def _source_release(source: Path | None) -> str | None:
    if source is None:
        return None
    from fdl._files import NotARegularFile, read_small_text

    try:
        text = (read_small_text(source / "version.txt", limit=4096) or "").strip()
    except (NotARegularFile, OSError):
        return None
    found = re.match(r"^(\d+\.\d+\.\d+)", text)
    return found.group(1) if found else None


def plan_rocm_build(torch: str, archs: Sequence[str], facts: RocmBuildFacts) -> RocmBuildPlan:
    """The ROCm build of ``torch`` for ``archs`` on a machine of ``facts``: the environment
    and steps PyTorch's build takes, and each precondition the machine does not meet."""
    from fdl.compat import load_table

    recipe = load_table("rocm")["source_build"]
    env = {str(k): str(v) for k, v in recipe["env"].items()}
    env["PYTORCH_ROCM_ARCH"] = ";".join(archs)
    if facts.root is not None:
        env["ROCM_PATH"] = facts.root
    steps = tuple(tuple(str(a) for a in step) for step in recipe["steps"])
    problems: list[tuple[str, str]] = []
    if facts.root is None:
        problems.append(
            (
                "no ROCm installation ($ROCM_PATH, $HIP_PATH, /opt/rocm)",
                "install ROCm (AMD's packages, or set ROCM_PATH to where it is)",
            )
        )
    else:
        missing = [p for p in recipe["packages"] if p not in facts.packages]
        if missing:
            problems.append(
                (
                    f"{facts.root} lacks the ROCm components PyTorch's build requires: {' '.join(missing)}",
                    "install ROCm's development packages for them (their <name>-config.cmake), or "
                    "point ROCM_PATH at a full ROCm installation",
                )
            )
        unknown = [a for a in archs if a not in facts.isas]
        if unknown:
            problems.append(
                (
                    f"this ROCm's device libraries have no code for {' '.join(unknown)} (they go "
                    f"up to {_newest(facts.isas)})",
                    "install a ROCm release whose device libraries have them "
                    f"(oclc_isa_version_{unknown[0][3:]}.bc) and set ROCM_PATH to it",
                )
            )
        if facts.compiler is None:
            problems.append(
                (f"no HIP compiler under {facts.root}", "install hipcc (ROCm's hip-dev)")
            )
    if facts.source_release is not None and facts.source_release != torch:
        problems.append(
            (
                f"the --source tree is PyTorch {facts.source_release}, not {torch}",
                f"give --torch {facts.source_release}, or a tree of {torch}",
            )
        )
    return RocmBuildPlan(torch, tuple(archs), env, steps, facts, tuple(problems))


def _sorted(isas: frozenset[str]) -> list[str]:
    return sorted(isas, key=gfx_sort_key)


def _newest(isas: frozenset[str]) -> str:
    return _sorted(isas)[-1] if isas else "none"
