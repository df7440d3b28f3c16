"""NCCL for the mixed rig: ``fdl nccl build`` compiles NVIDIA's NCCL in a container for the
GPUs of the rig (sm_61 beside sm_120), at the version the active libtorch carries, and
installs it beside the variants (``libtorch/nccl/builds/v<ver>-<archs>/``), where project
commands and ``fdl probe`` find it.

:func:`gather_facts` asks the machine once; :func:`plan_nccl_build` is pure;
:func:`build_nccl` runs a plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl._lazy import lazy_attribute
from fdl.nccl._builds import BuiltNccl, builds_dir, built_for, list_builds

if TYPE_CHECKING:
    from fdl.paths import Context

# What commands and fdl probe ask on every run (built_for) is imported at once; the
# planner and the executor only when a build is planned.
# <lazy-exports> generated from the modules' __all__ by `python -m fdl._lazy_tables --write`
if TYPE_CHECKING:
    from fdl.nccl._build import build_nccl, check_library
    from fdl.nccl._plan import DEFAULT_SOURCE, NcclFacts, NcclPlan, NcclRequest, plan_nccl_build
_HOMES = {
    "build_nccl": "_build",
    "check_library": "_build",
    "DEFAULT_SOURCE": "_plan",
    "NcclFacts": "_plan",
    "NcclPlan": "_plan",
    "NcclRequest": "_plan",
    "plan_nccl_build": "_plan",
}
# </lazy-exports>

__all__ = [
    "DEFAULT_SOURCE",
    "BuiltNccl",
    "NcclFacts",
    "NcclPlan",
    "NcclRequest",
    "build_nccl",
    "builds_dir",
    "built_for",
    "check_library",
    "gather_facts",
    "list_builds",
    "plan_nccl_build",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, globals(), name)


def gather_facts(request: NcclRequest, context: Context, environ: Mapping[str, str]) -> NcclFacts:
    """What the plan needs from this machine: the active variant (its CUDA, its torch and,
    unless ``--tag`` is given, the NCCL banner in ``libtorch_cuda.so``), the NVIDIA GPUs
    (unless ``--archs`` is given), the CPU count and what ``--source`` names."""
    from fdl.libtorch import variants
    from fdl.nccl._facts import scan_nccl_version
    from fdl.nccl._plan import NcclFacts

    libtorch_dir = context.libtorch_dir
    variant = variants.active_name(context)
    cuda = torch = banner = vendor = None
    banner_file = None
    if variant is not None:
        info = variants.read_info(libtorch_dir / variant, variant)
        cuda, torch, vendor = info.cuda, info.torch, info.vendor
        if request.tag is None:
            banner_file = libtorch_dir / variant / "lib" / "libtorch_cuda.so"
            banner = scan_nccl_version(banner_file)
    gpus: tuple[str, ...] = ()
    if request.archs is None:
        from fdl.system.survey import survey

        gpus = tuple(d.arch for d in survey(environ).devices if d.vendor == "nvidia")
    source = Path(request.source) if request.source else None
    is_dir = source is not None and "://" not in str(request.source) and source.is_dir()
    return NcclFacts(
        libtorch_dir=libtorch_dir,
        variant=variant,
        cuda=cuda,
        torch=torch,
        banner_version=banner,
        banner_file=banner_file,
        gpus=gpus,
        vendor=vendor,
        cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 4,
        source_is_dir=is_dir,
        source_has_makefile=is_dir and source is not None and (source / "Makefile").is_file(),
    )
