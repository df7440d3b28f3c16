"""What a run's figures depend on, captured once per run (JSON-ready)."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl import __version__
from fdl.errors import FdlError
from fdl.runner import Runner

if TYPE_CHECKING:
    from fdl.paths import Context

__all__ = ["GPU_QUERY", "capture_environment", "gpu_processes"]

GPU_QUERY = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu"


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _run(runner: Runner, argv: list[str], cwd: Path) -> str | None:
    if runner.which(argv[0]) is None:
        return None
    try:
        done = runner.run(argv, cwd=cwd, check=False, timeout=30)
    except FdlError:
        return None
    return done.stdout.strip() if done.ok else None


def _gpus(runner: Runner, cwd: Path) -> list[dict[str, str]] | None:
    out = _run(runner, ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader"], cwd)
    if out is None:
        return None
    keys = GPU_QUERY.split(",")
    return [
        dict(zip(keys, (c.strip() for c in line.split(",")), strict=False))
        for line in out.splitlines()
        if line.strip()
    ]


def gpu_processes(runner: Runner, cwd: Path) -> list[str] | None:
    """Processes using a GPU (``pid name`` lines), or None without nvidia-smi."""
    out = _run(
        runner,
        ["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
        cwd,
    )
    if out is None:
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def _variant(context: Context, name: str) -> dict[str, Any] | None:
    from fdl.libtorch.variants import read_info, variant_dir

    try:
        directory = variant_dir(context, name)
        if not (directory / "lib").is_dir():
            return None
        info = read_info(directory, name)
    except (FdlError, OSError):
        return None
    return {
        "torch": info.torch,
        "cuda": info.cuda,
        "archs": info.archs_found.get("cubin") or info.archs_requested,
        "source": info.source.get("kind"),
    }


def _libtorch(context: Context | None, names: Sequence[str]) -> dict[str, Any]:
    """The active variant and each named one, with its torch, CUDA and archs."""
    from fdl.libtorch.variants import active_name

    requested = os.environ.get("LIBTORCH")
    if context is None:
        return {"LIBTORCH": requested, "active": None, "variants": {}}
    try:
        active = active_name(context)
    except FdlError:
        active = None
    wanted = sorted({n for n in (active, *names) if n})
    return {
        "LIBTORCH": requested,
        "active": active,
        "variants": {n: _variant(context, n) for n in wanted},
    }


def capture_environment(
    runner: Runner,
    cwd: Path,
    *,
    context: Context | None = None,
    variants: Sequence[str] = (),
) -> dict[str, Any]:
    """CPU, governor, GPUs, git commit and dirty state, libtorch and fdl versions.

    Args:
        context: Where libtorch variants live (None: not recorded beyond $LIBTORCH).
        variants: Variant names the sides use (their LIBTORCH), described too.
    """
    status = _run(runner, ["git", "status", "--porcelain"], cwd)
    return {
        "fdl": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu": {
            "model": _cpu_model(),
            "count": os.cpu_count(),
            "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        },
        "gpus": _gpus(runner, cwd),
        "libtorch": _libtorch(context, variants),
        "git": {
            "commit": _run(runner, ["git", "rev-parse", "HEAD"], cwd),
            "dirty": None if status is None else bool(status),
        },
    }
