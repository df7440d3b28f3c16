"""An AMD variant's commands load the machine's ROCm runtime before the one libtorch's ROCm
build bundles (floDl 0.8: the reverse "segfaults at the first GPU op"); other variants are
as before."""

from __future__ import annotations

from pathlib import Path

from fdl.tasks._env import apply_changes
from fdl.tasks._libtorch_env import Variant, variant_exports
from fdl.tasks._plan import _host_rocm_lib


def _loader(variant: Variant, rocm_lib: str | None) -> str:
    env = apply_changes(
        {"LD_LIBRARY_PATH": "/usr/lib/extra"}, variant_exports("/lt", variant, rocm_lib=rocm_lib)
    )
    return env["LD_LIBRARY_PATH"]


def test_rocm_first_for_an_amd_variant_only() -> None:
    amd = Variant("precompiled/rocm70", Path("/lt"), vendor="amd")
    nvidia = Variant("precompiled/cu128", Path("/lt"), cuda="12.8", vendor="nvidia")
    assert _loader(amd, "/opt/rocm/lib") == "/opt/rocm/lib:/lt/lib:/usr/lib/extra"
    assert _loader(amd, None) == "/lt/lib:/usr/lib/extra"  # no ROCm runtime: the bundled one
    assert _loader(nvidia, "/opt/rocm/lib") == "/lt/lib:/usr/lib/extra"


def test_the_host_runtime_is_found_where_floDl_looks(tmp_path: Path) -> None:
    rocm = tmp_path / "rocm-7.0.2"
    (rocm / "lib").mkdir(parents=True)
    (rocm / "lib" / "libhsa-runtime64.so.1").write_text("")
    assert _host_rocm_lib({"ROCM_PATH": str(rocm)}) == str(rocm / "lib")
    assert _host_rocm_lib({"ROCM_PATH": str(tmp_path / "none"), "HIP_PATH": str(rocm)}) == str(
        rocm / "lib"
    )
