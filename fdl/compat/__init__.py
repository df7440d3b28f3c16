"""Compatibility knowledge: GPU archs, CUDA toolkits, PyTorch builds, libtorch downloads.

The facts live in versioned YAML tables under ``fdl/data/compat/`` (loaded once, on first
use); this package answers questions over them with typed results. Nothing here runs a
program or touches the network.

Modules:
    archs: parse/render arch lists (``6.1;12.0+PTX``, gencode flags, ``sm61-sm120``).
    rules: whether code for some targets runs on a GPU (:func:`runs_on`).
    cuda: toolkits, which can compile what, host compilers, driver floor, image tags.
    pytorch: releases, official variants and their archs, :func:`choose_variant`.
    downloads: libtorch URLs and archive layout.
    runtime: run-time libraries of a CUDA libtorch and where they come from.
    build: source-build switches, memory per job, fatbin compression, cuDNN limits.
    frameworks: the libtorch each floDl / tch-rs release compiles against, header standards.
"""

from __future__ import annotations

from fdl.compat._data import CompatDataError, in_range, load_table, version_key
from fdl.compat.archs import (
    ArchList,
    Capability,
    Kind,
    Target,
    capability_info,
    family_names,
    known_capabilities,
    parse_archs,
    parse_capability,
)
from fdl.compat.build import (
    BuildSwitch,
    CudnnLimit,
    SwitchCost,
    build_switches,
    cmake_policy_env,
    cudnn_limit,
    fatbin_compression_flags,
    max_parallel_jobs,
    memory_per_job_gb,
    switch_costs,
)
from fdl.compat.cuda import (
    CudaImage,
    DriverCheck,
    HostCompilers,
    Toolkit,
    check_driver,
    choose_toolkit,
    compilable_toolkits,
    host_compilers,
    image_tag,
    toolkit,
    toolkits,
    uncompilable_reason,
)
from fdl.compat.downloads import (
    ArchiveLayout,
    archive_layout,
    current_platform,
    libtorch_filename,
    libtorch_platforms,
    libtorch_url,
    needs_user_agent,
)
from fdl.compat.frameworks import (
    Framework,
    FrameworkRelease,
    UnknownFrameworkRelease,
    framework,
    framework_for_crate,
    framework_release,
    frameworks,
    headers_cxx_standard,
    matching_release,
    parse_cargo_requirement,
)
from fdl.compat.gpus import capability_from_name
from fdl.compat.pytorch import (
    BuildConstraints,
    Observation,
    Release,
    SourceRequirements,
    ToolkitChoice,
    Variant,
    VariantChoice,
    build_constraints,
    buildable_toolkits,
    choose_variant,
    default_torch_version,
    newer_release_covering,
    older_release_covering,
    preferred_toolkit,
    release,
    releases,
    releases_that_build,
    resolve_torch_version,
    source_requirements,
    tested_cuda,
    variant_targets,
)
from fdl.compat.rules import Match, Verdict, covers, runs_on
from fdl.compat.runtime import (
    RuntimeLibrary,
    image_flavour_libraries,
    injected_libraries,
    is_switched_off,
    library_for_soname,
    runtime_libraries,
)

__all__ = [
    "ArchList",
    "ArchiveLayout",
    "BuildConstraints",
    "BuildSwitch",
    "Capability",
    "CompatDataError",
    "CudaImage",
    "CudnnLimit",
    "DriverCheck",
    "Framework",
    "FrameworkRelease",
    "HostCompilers",
    "Kind",
    "Match",
    "Observation",
    "Release",
    "RuntimeLibrary",
    "SourceRequirements",
    "SwitchCost",
    "Target",
    "Toolkit",
    "ToolkitChoice",
    "UnknownFrameworkRelease",
    "Variant",
    "VariantChoice",
    "Verdict",
    "archive_layout",
    "build_constraints",
    "build_switches",
    "buildable_toolkits",
    "capability_from_name",
    "capability_info",
    "check_driver",
    "choose_toolkit",
    "choose_variant",
    "cmake_policy_env",
    "compilable_toolkits",
    "covers",
    "cudnn_limit",
    "current_platform",
    "default_torch_version",
    "family_names",
    "fatbin_compression_flags",
    "framework",
    "framework_for_crate",
    "framework_release",
    "frameworks",
    "headers_cxx_standard",
    "host_compilers",
    "image_flavour_libraries",
    "image_tag",
    "in_range",
    "injected_libraries",
    "is_switched_off",
    "known_capabilities",
    "library_for_soname",
    "libtorch_filename",
    "libtorch_platforms",
    "libtorch_url",
    "load_table",
    "matching_release",
    "max_parallel_jobs",
    "memory_per_job_gb",
    "needs_user_agent",
    "newer_release_covering",
    "older_release_covering",
    "parse_archs",
    "parse_capability",
    "parse_cargo_requirement",
    "preferred_toolkit",
    "release",
    "releases",
    "releases_that_build",
    "resolve_torch_version",
    "runs_on",
    "runtime_libraries",
    "source_requirements",
    "switch_costs",
    "tested_cuda",
    "toolkit",
    "toolkits",
    "uncompilable_reason",
    "variant_targets",
    "version_key",
]
