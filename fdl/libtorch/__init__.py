"""libtorch variants: side by side under ``<root>/libtorch/``, one active.

The layout lives in :mod:`fdl.libtorch.variants`. Everything that creates a variant goes
through :func:`install_tree` (lock, staging directory, metadata read from the binaries,
atomic rename, activation):

- official zips: :func:`plan_download` (pure) then :func:`run_download`;
- PyPI wheels: :mod:`fdl.libtorch._wheel` (a .whl, a Python environment, or pip);
- source builds: the builder calls :func:`register_variant` with its finished tree.

:func:`verify_variant` reads a variant's binaries (GPU archs from ``.nv_fatbin``, library
dependencies) and compares them with its metadata and this machine's GPUs.

Example (a source build registering its result)::

    from fdl.libtorch import VariantInfo, register_variant, verify_variant

    info = VariantInfo(name="builds/sm61-sm120", torch="2.14.1", cuda="12.8",
                       archs_requested=["sm_61", "sm_120"],
                       source={"kind": "build", "recipe": "docker", "image": "..."})
    result = register_variant(context, "builds/sm61-sm120", tree, info)
    report = verify_variant(result.target.path, "builds/sm61-sm120", gpus=detect_gpus())
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.libtorch._download import MIRROR_ENV, DownloadPlan, plan_download, run_download
    from fdl.libtorch._install import (
        InstallResult,
        Target,
        install_tree,
        installed_build_version,
        register_variant,
        resolve_target,
    )
    from fdl.libtorch._select import (
        Selection,
        build_archs,
        build_command,
        coverage_fix,
        select_variant,
    )
    from fdl.libtorch._smoke import smoke_runner
    from fdl.libtorch._verify import VerifyReport, gpu_label, verify_variant
    from fdl.libtorch.variants import VariantInfo

# Imported on first use: the task runner reads the layout (fdl.libtorch.variants) on every
# `fdl <command>` and must not pay for the binary readers and compatibility tables.
_LAZY = {
    "MIRROR_ENV": "_download",
    "DownloadPlan": "_download",
    "plan_download": "_download",
    "run_download": "_download",
    "InstallResult": "_install",
    "Target": "_install",
    "install_tree": "_install",
    "installed_build_version": "_install",
    "register_variant": "_install",
    "resolve_target": "_install",
    "Selection": "_select",
    "build_archs": "_select",
    "build_command": "_select",
    "coverage_fix": "_select",
    "select_variant": "_select",
    "VerifyReport": "_verify",
    "gpu_label": "_verify",
    "smoke_runner": "_smoke",
    "verify_variant": "_verify",
    "VariantInfo": "variants",
}

__all__ = [
    "MIRROR_ENV",
    "DownloadPlan",
    "InstallResult",
    "Selection",
    "Target",
    "VariantInfo",
    "VerifyReport",
    "build_archs",
    "build_command",
    "coverage_fix",
    "gpu_label",
    "install_tree",
    "installed_build_version",
    "plan_download",
    "register_variant",
    "resolve_target",
    "run_download",
    "select_variant",
    "smoke_runner",
    "verify_variant",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
