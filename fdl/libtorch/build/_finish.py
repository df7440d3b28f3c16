"""After a build: read the archs really in the binaries, verify them, install, activate.

A build whose libraries lack a requested arch is a failed build: nothing is installed and
the message names what is missing (a silently wrong arch list costs hours later).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.compat import ArchList
from fdl.errors import FdlError
from fdl.libtorch.build._buildplan import BuildPlan

__all__ = ["FACTS_FILE", "VerificationFailed", "found_targets", "install_variant", "verify"]

FACTS_FILE = ".fdl-build-facts"
LIBRARY = "lib/libtorch.so"


class VerificationFailed(FdlError):
    """The built libraries do not contain what was asked for (exit 1)."""


def found_targets(tree: Path) -> tuple[ArchList, dict[str, str]]:
    """The GPU targets in the tree's libraries, and a summary per library that has any."""
    from fdl.binaries import read_device_code

    found = ArchList()
    per_library: dict[str, str] = {}
    lib = tree / "lib"
    for path in sorted(lib.glob("*.so*")) if lib.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            continue
        code = read_device_code(path)
        if code.has_device_code:
            targets = code.primary_targets()
            found = found | targets
            per_library[path.name] = code.summary()
    return found, per_library


def verify(plan: BuildPlan, tree: Path) -> tuple[ArchList, dict[str, str]]:
    """Check the finished tree: libtorch is there and every requested target is inside.

    Raises:
        VerificationFailed: no libtorch.so, or requested targets missing from the fatbins.
    """
    if not (tree / LIBRARY).is_file():
        present = (
            ", ".join(sorted(p.name for p in (tree / "lib").iterdir()))
            if (tree / "lib").is_dir()
            else "nothing"
        )
        raise VerificationFailed(
            f"the build produced no {LIBRARY} (lib/ holds: {present})",
            hint=f"read the build log {plan.log_file}",
        )
    found, per_library = found_targets(tree)
    if not plan.archs:
        return found, per_library
    have = set(found.codes())
    missing = [code for code in plan.archs.codes() if code not in have]
    if missing:
        shown = "; ".join(f"{k}: {v}" for k, v in per_library.items()) or "no GPU code at all"
        raise VerificationFailed(
            f"the built libraries lack {' '.join(missing)} (asked for "
            f"{plan.arch_list}; found {shown})",
            hint="check TORCH_CUDA_ARCH_LIST in the build log "
            f"({plan.log_file}); rebuild with --fresh",
        )
    return found, per_library


def read_facts(tree: Path) -> dict[str, str]:
    """The ``key=value`` facts the Docker builder wrote (and remove the file)."""
    path = tree / FACTS_FILE
    if not path.is_file():
        return {}
    facts = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and value.strip():
            facts[key.strip()] = value.strip()
    path.unlink()
    return facts


def build_info(
    plan: BuildPlan,
    found: ArchList,
    facts: Mapping[str, str],
    duration_s: float,
    cache: Mapping[str, Any],
) -> Any:
    """The variant's metadata (``variant.json``)."""
    from fdl.libtorch.variants import VariantInfo

    source: dict[str, Any] = {
        "kind": "build",
        "backend": plan.backend,
        "recipe": plan.recipe,
        "git_hash": facts.get("git_hash"),
        "source_dir": str(plan.source_dir) if plan.source_given else None,
    }
    if plan.docker is not None:
        source["image"] = plan.docker.base_image
    toolchain = {k: v for k, v in facts.items() if k in ("nvcc", "gcc", "cmake", "python")}
    return VariantInfo(
        name=plan.variant,
        torch=(facts.get("torch_version") or plan.torch).split("+", 1)[0].strip(),
        cuda=plan.cuda,
        cudnn=facts.get("cudnn"),
        archs_requested=plan.archs.codes(),
        archs_found={"cubin": [t.code for t in found.cubins], "ptx": [t.code for t in found.ptx]},
        abi="cxx11",
        source=source,
        extra={
            "TORCH_CUDA_ARCH_LIST": plan.arch_list,
            "env": {k: v for k, v in plan.env.items() if not k.startswith(("SCCACHE_", "CCACHE_"))},
            "jobs": plan.jobs,
            "toolkit": plan.toolkit,
            "toolchain": toolchain,
            "duration_s": round(duration_s, 1),
            "compiler_cache": dict(cache),
        },
    )


def install_variant(plan: BuildPlan, staging: Path, info: Any) -> bool:
    """Move the verified tree into place (under the variant's lock), write its metadata,
    activate it if asked.

    Returns:
        Whether it is now the active variant.
    """
    from fdl.libtorch import register_variant
    from fdl.paths import Context

    root = plan.output_dir.parent.parent.parent
    result = register_variant(
        Context(root, True), plan.variant, staging, info, activate=plan.activate, move=True
    )
    return bool(result.activated)
