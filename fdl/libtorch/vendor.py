"""Which GPU stack a libtorch variant targets, and what that means for a build.

One rule, as data: floDl's CLI 0.8.0 decides a variant's vendor from its basename
(``flodl-hw`` 0.8.0 ``src/vendor.rs:93-113``, used by ``flodl-cli`` 0.8.0
``src/libtorch/detect.rs:158-205``): ``cpu`` or ``cpu-...`` is CPU, ``cu<N>``/``sm<N>``
NVIDIA, ``rocm<N>``/``gfx<N>`` AMD (a prefix counts only when a digit follows). The cargo
feature and the compose service of a vendor are the same word (``cuda``, ``rocm``:
``GpuVendor::cargo_feature``, vendor.rs:49-54, and ``run.rs:717-722``).

fdl's own variants record what they are in ``variant.json``: a recorded vendor wins, then a
recorded CUDA version (an NVIDIA build), then the name.
"""

from __future__ import annotations

__all__ = ["CPU", "VENDORS", "feature_of", "service_of", "variant_vendor"]

CPU = "cpu"

# vendor -> the cargo feature floDl builds it with, which is also the compose service's name
VENDORS: dict[str, str] = {"nvidia": "cuda", "amd": "rocm"}

# basename prefixes followed by a digit -> vendor (flodl-hw vendor.rs:106-111)
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("cu", "nvidia"),
    ("sm", "nvidia"),
    ("rocm", "amd"),
    ("gfx", "amd"),
)

# What floDl builds when the variant says nothing: CUDA (run.rs:337-349, 712-719).
DEFAULT_FEATURE = "cuda"


def variant_vendor(
    name: str, *, cuda: str | None = None, recorded: str | None = None
) -> str | None:
    """``cpu``, ``nvidia`` or ``amd`` for the variant ``name`` (``precompiled/cu128``), or
    None when neither what it records nor its name says.

    Args:
        name: The variant's path under the libtorch directory (its basename is read).
        cuda: The CUDA version its ``variant.json``/``.arch`` records (an NVIDIA build).
        recorded: A vendor its ``variant.json`` records, when it records one.
    """
    if recorded in (CPU, *VENDORS):
        return recorded
    if cuda and cuda.lower() != "none":
        return "nvidia"
    base = name.rstrip("/").rsplit("/", 1)[-1]
    if base == CPU or base.startswith(CPU + "-"):
        return CPU
    for prefix, vendor in _PREFIXES:
        rest = base[len(prefix) :]
        if base.startswith(prefix) and rest[:1].isdigit():
            return vendor
    return None


def feature_of(vendor: str | None) -> str:
    """The cargo feature a project builds for ``vendor`` (``FDL_GPU_FEATURE``): ``rocm`` for
    AMD, else ``cuda`` (floDl's CLI answers ``cuda`` for a CPU variant too, run.rs:337-349)."""
    return VENDORS.get(vendor or "", DEFAULT_FEATURE)


def service_of(vendor: str | None) -> str:
    """The compose service the logical ``docker: gpu`` stands for (run.rs:678-745)."""
    return feature_of(vendor)
