"""libtorch variants: side by side under ``<root>/libtorch/``, one active.

The layout lives in :mod:`fdl.libtorch.variants`. Where a variant comes from is one
interface, :class:`VariantSource` (:mod:`fdl.libtorch.sources`), and :func:`install_source`
installs any source through :func:`install_tree` (lock, staging directory, metadata read
from the binaries, atomic rename, activation). The six sources and their functions:

- official zips (``archive``): :func:`plan_download` (pure) then :func:`run_download`;
- PyPI wheels (``wheel``): :func:`wheel_source` then :func:`install_wheel` (a .whl, a
  Python environment, or pip);
- the CPU view of a wheel (``cpu-view``): :func:`install_cpu_view` (only what a CPU program
  loads, read out of the index's wheels by HTTP Range: a CPU libtorch where the index
  serves CUDA builds only);
- a team's OCI registry (``registry``): :func:`push_variant` and :func:`pull_variant`
  (``fdl libtorch push``/``pull``: the variant as an OCI image, pulled without a docker
  engine), :func:`find_shared` to look for one that fits;
- source builds (``build``): the builder (:mod:`fdl.libtorch.build`) calls
  :func:`register_variant` with its finished tree;
- a tree on disk (``directory``): :func:`install_dir`.

Above them, ``fdl setup`` decides which one: :func:`plan_setup` (reads the installed
variants, decides) then :func:`run_setup` (activate, download with the wheel as fallback,
or the wheel; the CPU view for a CPU plan); :func:`choose_setup` puts the team's registry
(and the torch installed for the user's Python) first: both ask the one chooser,
:func:`choose_source`, which ranks every source's offer by a preference table kept as data.

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

from fdl._lazy import lazy_attribute

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

    from fdl.libtorch import variants

# Deliberately lazy (PEP 562), `variants` too: the task runner imports this package on
# every `fdl <command>` (the framework check), `variants` only where a variant is active;
# importing this package eagerly would load the binary readers, the compatibility tables
# and the wheel/download machinery (measured: 140 ms instead of 40 ms).
# <lazy-exports> generated from the modules' __all__ by `python -m fdl._lazy_tables --write`
if TYPE_CHECKING:
    from fdl.libtorch._caches import (
        CACHES,
        CacheEntry,
        ImageOwner,
        check_cleanable,
        clean_caches,
        list_caches,
    )
    from fdl.libtorch._choose import (
        Choice,
        Facts,
        Need,
        Offer,
        choose_source,
        gather_facts,
        load_preferences,
    )
    from fdl.libtorch._crate_facts import (
        CrateFactError,
        FrameworkReading,
        UnseenFramework,
        facts_from_texts,
        fetch_framework_crates,
        files_to_read,
        read_framework_release,
    )
    from fdl.libtorch._crate_source import CrateSourceError
    from fdl.libtorch._deps import library_checks, unresolved_libraries
    from fdl.libtorch._framework import TorchDecision, framework_torch
    from fdl.libtorch._framework_files import CHECK_KEY, FrameworkPin, detect_framework
    from fdl.libtorch._install import (
        InstallResult,
        Target,
        finish_info,
        install_tree,
        installed_build_version,
        resolve_target,
    )
    from fdl.libtorch._needs import build_need, install_need, need_for
    from fdl.libtorch._scan import DeviceScan, detect_abi, scan_device_code
    from fdl.libtorch._select import (
        CudaTarget,
        Selection,
        build_archs,
        build_command,
        coverage_fix,
        cuda_target,
        installed_coverage,
        select_rocm,
        select_variant,
    )
    from fdl.libtorch._settings import LibtorchSettings, project_settings
    from fdl.libtorch._setup import (
        SetupPlan,
        SetupResult,
        choose_setup,
        covers_gpus,
        plan_setup,
        run_setup,
    )
    from fdl.libtorch._smoke import smoke_runner
    from fdl.libtorch._verify import VerifyReport, gpu_label, verify_variant
    from fdl.libtorch.sources import (
        MIRROR_ENV,
        REGISTRY_ENV,
        DownloadPlan,
        FromArchive,
        FromBuild,
        FromCpuView,
        FromDirectory,
        FromRegistry,
        FromWheel,
        PullResult,
        PushResult,
        RepositoryNotFound,
        SharedMatch,
        VariantSource,
        WheelSource,
        check_download_target,
        check_wheel,
        choose_compression,
        find_shared,
        install_cpu_view,
        install_dir,
        install_source,
        install_wheel,
        local_wheel,
        parse_reference,
        plan_download,
        pull_variant,
        push_variant,
        register_variant,
        run_download,
        wheel_source,
    )
    from fdl.libtorch.variants import VariantInfo, describe_view
_HOMES = {
    "CACHES": "_caches",
    "CacheEntry": "_caches",
    "ImageOwner": "_caches",
    "check_cleanable": "_caches",
    "clean_caches": "_caches",
    "list_caches": "_caches",
    "Choice": "_choose",
    "Facts": "_choose",
    "Need": "_choose",
    "Offer": "_choose",
    "choose_source": "_choose",
    "gather_facts": "_choose",
    "load_preferences": "_choose",
    "CrateFactError": "_crate_facts",
    "FrameworkReading": "_crate_facts",
    "UnseenFramework": "_crate_facts",
    "facts_from_texts": "_crate_facts",
    "fetch_framework_crates": "_crate_facts",
    "files_to_read": "_crate_facts",
    "read_framework_release": "_crate_facts",
    "CrateSourceError": "_crate_source",
    "library_checks": "_deps",
    "unresolved_libraries": "_deps",
    "TorchDecision": "_framework",
    "framework_torch": "_framework",
    "CHECK_KEY": "_framework_files",
    "FrameworkPin": "_framework_files",
    "detect_framework": "_framework_files",
    "InstallResult": "_install",
    "Target": "_install",
    "finish_info": "_install",
    "install_tree": "_install",
    "installed_build_version": "_install",
    "resolve_target": "_install",
    "build_need": "_needs",
    "install_need": "_needs",
    "need_for": "_needs",
    "DeviceScan": "_scan",
    "detect_abi": "_scan",
    "scan_device_code": "_scan",
    "CudaTarget": "_select",
    "Selection": "_select",
    "build_archs": "_select",
    "build_command": "_select",
    "coverage_fix": "_select",
    "cuda_target": "_select",
    "installed_coverage": "_select",
    "select_rocm": "_select",
    "select_variant": "_select",
    "LibtorchSettings": "_settings",
    "project_settings": "_settings",
    "SetupPlan": "_setup",
    "SetupResult": "_setup",
    "choose_setup": "_setup",
    "covers_gpus": "_setup",
    "plan_setup": "_setup",
    "run_setup": "_setup",
    "smoke_runner": "_smoke",
    "VerifyReport": "_verify",
    "gpu_label": "_verify",
    "verify_variant": "_verify",
    "MIRROR_ENV": "sources",
    "REGISTRY_ENV": "sources",
    "DownloadPlan": "sources",
    "FromArchive": "sources",
    "FromBuild": "sources",
    "FromCpuView": "sources",
    "FromDirectory": "sources",
    "FromRegistry": "sources",
    "FromWheel": "sources",
    "PullResult": "sources",
    "PushResult": "sources",
    "RepositoryNotFound": "sources",
    "SharedMatch": "sources",
    "VariantSource": "sources",
    "WheelSource": "sources",
    "check_download_target": "sources",
    "check_wheel": "sources",
    "choose_compression": "sources",
    "find_shared": "sources",
    "install_cpu_view": "sources",
    "install_dir": "sources",
    "install_source": "sources",
    "install_wheel": "sources",
    "local_wheel": "sources",
    "parse_reference": "sources",
    "plan_download": "sources",
    "pull_variant": "sources",
    "push_variant": "sources",
    "register_variant": "sources",
    "run_download": "sources",
    "wheel_source": "sources",
    "VariantInfo": "variants",
    "describe_view": "variants",
}
# </lazy-exports>

__all__ = [
    "CACHES",
    "CHECK_KEY",
    "MIRROR_ENV",
    "REGISTRY_ENV",
    "CacheEntry",
    "Choice",
    "CrateFactError",
    "CrateSourceError",
    "CudaTarget",
    "DeviceScan",
    "DownloadPlan",
    "Facts",
    "FrameworkPin",
    "FrameworkReading",
    "FromArchive",
    "FromBuild",
    "FromCpuView",
    "FromDirectory",
    "FromRegistry",
    "FromWheel",
    "ImageOwner",
    "InstallResult",
    "LibtorchSettings",
    "Need",
    "Offer",
    "PullResult",
    "PushResult",
    "RepositoryNotFound",
    "Selection",
    "SetupPlan",
    "SetupResult",
    "SharedMatch",
    "Target",
    "TorchDecision",
    "UnseenFramework",
    "VariantInfo",
    "VariantSource",
    "VerifyReport",
    "WheelSource",
    "build_archs",
    "build_command",
    "build_need",
    "check_cleanable",
    "check_download_target",
    "check_wheel",
    "choose_compression",
    "choose_setup",
    "choose_source",
    "clean_caches",
    "coverage_fix",
    "covers_gpus",
    "cuda_target",
    "describe_view",
    "detect_abi",
    "detect_framework",
    "facts_from_texts",
    "fetch_framework_crates",
    "files_to_read",
    "find_shared",
    "finish_info",
    "framework_torch",
    "gather_facts",
    "gpu_label",
    "install_cpu_view",
    "install_dir",
    "install_need",
    "install_source",
    "install_tree",
    "install_wheel",
    "installed_build_version",
    "installed_coverage",
    "library_checks",
    "list_caches",
    "load_preferences",
    "local_wheel",
    "need_for",
    "parse_reference",
    "plan_download",
    "plan_setup",
    "project_settings",
    "pull_variant",
    "push_variant",
    "read_framework_release",
    "register_variant",
    "resolve_target",
    "run_download",
    "run_setup",
    "scan_device_code",
    "select_rocm",
    "select_variant",
    "smoke_runner",
    "unresolved_libraries",
    "variants",
    "verify_variant",
    "wheel_source",
]


def __getattr__(name: str) -> Any:
    if name == "variants":  # the module, on first use (a project without one never needs it)
        return import_module(f"{__name__}.variants")
    return lazy_attribute(__name__, _HOMES, None, name)
