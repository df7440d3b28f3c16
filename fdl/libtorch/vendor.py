"""What a libtorch variant's vendor means for a build: the cargo feature floDl builds it
with and the compose service ``docker: gpu`` stands for, the same word (``cuda``, ``rocm``:
flodl-hw 0.8.0 ``GpuVendor::cargo_feature``, vendor.rs:49-54, and flodl-cli 0.8.0
``run.rs:717-722``). Which vendor a variant is: :attr:`fdl.libtorch.variants.VariantInfo.vendor`
(one rule, :func:`fdl._vendors.vendor_of_variant`).
"""

from __future__ import annotations

__all__ = ["CPU", "VENDORS", "feature_of", "service_of"]

CPU = "cpu"

# vendor -> the cargo feature floDl builds it with, which is also the compose service's name
VENDORS: dict[str, str] = {"nvidia": "cuda", "amd": "rocm"}

# What floDl builds when the variant says nothing: CUDA (run.rs:337-349, 712-719).
DEFAULT_FEATURE = "cuda"


def feature_of(vendor: str | None) -> str:
    """The cargo feature a project builds for ``vendor`` (``FDL_GPU_FEATURE``): ``rocm`` for
    AMD, else ``cuda`` (floDl's CLI answers ``cuda`` for a CPU variant too, run.rs:337-349)."""
    return VENDORS.get(vendor or "", DEFAULT_FEATURE)


def service_of(vendor: str | None) -> str:
    """The compose service the logical ``docker: gpu`` stands for (run.rs:678-745)."""
    return feature_of(vendor)
