"""libtorch variants: side by side under ``<root>/libtorch/``, one active.

The layout lives in :mod:`fdl.libtorch.variants`. Everything that creates a variant goes
through :func:`install_tree` (lock, staging directory, metadata read from the binaries,
atomic rename, activation):

- official zips: :func:`plan_download` (pure) then :func:`run_download`;
- PyPI wheels: :func:`wheel_source` then :func:`install_wheel` (a .whl, a Python
  environment, or pip);
- the CPU view of a wheel: :func:`install_cpu_view` (only what a CPU program loads, read
  out of the index's wheels by HTTP Range: a CPU libtorch where the index serves CUDA
  builds only);
- a tree on disk: :func:`install_dir`;
- a team's OCI registry: :func:`push_variant` and :func:`pull_variant` (``fdl libtorch
  push``/``pull``: the variant as an OCI image, pulled without a docker engine);
- ``fdl setup``: :func:`plan_setup` (reads the installed variants, decides) then
  :func:`run_setup` (activate, download with the wheel as fallback, or the wheel);
- source builds: the builder calls :func:`register_variant` with its finished tree.

:func:`variants.remove` takes the variant's lock itself, like the installs.

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
from typing import TYPE_CHECKING, Any

from fdl.libtorch import variants

if TYPE_CHECKING:
    from fdl.libtorch._adopt import (
        install_cpu_view,
        install_dir,
        install_wheel,
        unresolved_libraries,
        wheel_source,
    )
    from fdl.libtorch._caches import (
        CACHES,
        CacheEntry,
        ImageOwner,
        check_cleanable,
        clean_caches,
        list_caches,
    )
    from fdl.libtorch._cpu_view import local_wheel
    from fdl.libtorch._deps import library_checks
    from fdl.libtorch._download import (
        MIRROR_ENV,
        DownloadPlan,
        check_download_target,
        plan_download,
        run_download,
    )
    from fdl.libtorch._framework import (
        CHECK_KEY,
        FrameworkPin,
        TorchDecision,
        detect_framework,
        framework_torch,
    )
    from fdl.libtorch._install import (
        InstallResult,
        Target,
        finish_info,
        install_tree,
        installed_build_version,
        register_variant,
        resolve_target,
    )
    from fdl.libtorch._scan import DeviceScan, detect_abi, scan_device_code
    from fdl.libtorch._select import (
        CudaTarget,
        Selection,
        build_archs,
        build_command,
        coverage_fix,
        cuda_target,
        select_variant,
    )
    from fdl.libtorch._settings import LibtorchSettings, project_settings
    from fdl.libtorch._setup import SetupPlan, SetupResult, covers_gpus, plan_setup, run_setup
    from fdl.libtorch._share import (
        REGISTRY_ENV,
        PullResult,
        PushResult,
        choose_compression,
        parse_reference,
        pull_variant,
        push_variant,
    )
    from fdl.libtorch._smoke import smoke_runner
    from fdl.libtorch._team import SharedMatch, find_shared, prefer_shared
    from fdl.libtorch._verify import VerifyReport, gpu_label, verify_variant
    from fdl.libtorch._wheel import WheelSource, check_wheel
    from fdl.libtorch.variants import VariantInfo, describe_view

# Deliberately lazy (PEP 562): the task runner imports fdl.libtorch.variants on every
# `fdl <command>`; importing this package eagerly would load the binary readers, the
# compatibility tables and the wheel/download machinery (measured: 140 ms instead of 40 ms).
_LAZY = {
    "install_cpu_view": "_adopt",
    "install_dir": "_adopt",
    "install_wheel": "_adopt",
    "unresolved_libraries": "_adopt",
    "wheel_source": "_adopt",
    "describe_view": "variants",
    "local_wheel": "_cpu_view",
    "CACHES": "_caches",
    "CacheEntry": "_caches",
    "ImageOwner": "_caches",
    "check_cleanable": "_caches",
    "clean_caches": "_caches",
    "list_caches": "_caches",
    "library_checks": "_deps",
    "MIRROR_ENV": "_download",
    "DownloadPlan": "_download",
    "check_download_target": "_download",
    "plan_download": "_download",
    "run_download": "_download",
    "CHECK_KEY": "_framework",
    "FrameworkPin": "_framework",
    "TorchDecision": "_framework",
    "detect_framework": "_framework",
    "framework_torch": "_framework",
    "InstallResult": "_install",
    "Target": "_install",
    "finish_info": "_install",
    "install_tree": "_install",
    "installed_build_version": "_install",
    "register_variant": "_install",
    "resolve_target": "_install",
    "DeviceScan": "_scan",
    "detect_abi": "_scan",
    "scan_device_code": "_scan",
    "Selection": "_select",
    "CudaTarget": "_select",
    "cuda_target": "_select",
    "build_archs": "_select",
    "build_command": "_select",
    "coverage_fix": "_select",
    "select_variant": "_select",
    "LibtorchSettings": "_settings",
    "REGISTRY_ENV": "_share",
    "PullResult": "_share",
    "PushResult": "_share",
    "choose_compression": "_share",
    "parse_reference": "_share",
    "pull_variant": "_share",
    "push_variant": "_share",
    "project_settings": "_settings",
    "SetupPlan": "_setup",
    "SetupResult": "_setup",
    "covers_gpus": "_setup",
    "plan_setup": "_setup",
    "run_setup": "_setup",
    "smoke_runner": "_smoke",
    "SharedMatch": "_team",
    "find_shared": "_team",
    "prefer_shared": "_team",
    "VerifyReport": "_verify",
    "gpu_label": "_verify",
    "verify_variant": "_verify",
    "WheelSource": "_wheel",
    "check_wheel": "_wheel",
    "VariantInfo": "variants",
}

__all__ = [
    "CACHES",
    "CHECK_KEY",
    "MIRROR_ENV",
    "REGISTRY_ENV",
    "CacheEntry",
    "CudaTarget",
    "DeviceScan",
    "DownloadPlan",
    "FrameworkPin",
    "ImageOwner",
    "InstallResult",
    "LibtorchSettings",
    "PullResult",
    "PushResult",
    "Selection",
    "SetupPlan",
    "SetupResult",
    "SharedMatch",
    "Target",
    "TorchDecision",
    "VariantInfo",
    "VerifyReport",
    "WheelSource",
    "build_archs",
    "build_command",
    "check_cleanable",
    "check_download_target",
    "check_wheel",
    "choose_compression",
    "clean_caches",
    "coverage_fix",
    "covers_gpus",
    "cuda_target",
    "describe_view",
    "detect_abi",
    "detect_framework",
    "find_shared",
    "finish_info",
    "framework_torch",
    "gpu_label",
    "install_cpu_view",
    "install_dir",
    "install_tree",
    "install_wheel",
    "installed_build_version",
    "library_checks",
    "list_caches",
    "local_wheel",
    "parse_reference",
    "plan_download",
    "plan_setup",
    "prefer_shared",
    "project_settings",
    "pull_variant",
    "push_variant",
    "register_variant",
    "resolve_target",
    "run_download",
    "run_setup",
    "scan_device_code",
    "select_variant",
    "smoke_runner",
    "unresolved_libraries",
    "variants",
    "verify_variant",
    "wheel_source",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
