"""Where a libtorch variant comes from: the official archives, PyPI's wheels, the CPU view
of a wheel, the team's registry, a source build and a directory on disk.

Lazy (PEP 562), as :mod:`fdl.libtorch` is: a source's modules load when one of its names
is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fdl.libtorch.sources._adopt import (
        install_cpu_view,
        install_dir,
        install_wheel,
        unresolved_libraries,
        wheel_source,
    )
    from fdl.libtorch.sources._archive import (
        MIRROR_ENV,
        DownloadPlan,
        ProgressCallback,
        check_download_target,
        plan_download,
        run_download,
    )
    from fdl.libtorch.sources._cpu_view import local_wheel
    from fdl.libtorch.sources._registry import (
        REGISTRY_ENV,
        PullResult,
        PushResult,
        choose_compression,
        parse_reference,
        pull_variant,
        push_variant,
    )
    from fdl.libtorch.sources._team import SharedMatch, find_shared
    from fdl.libtorch.sources._wheel import WheelSource, check_wheel

_LAZY = {
    "install_cpu_view": "_adopt",
    "install_dir": "_adopt",
    "install_wheel": "_adopt",
    "unresolved_libraries": "_adopt",
    "wheel_source": "_adopt",
    "MIRROR_ENV": "_archive",
    "DownloadPlan": "_archive",
    "ProgressCallback": "_archive",
    "check_download_target": "_archive",
    "plan_download": "_archive",
    "run_download": "_archive",
    "local_wheel": "_cpu_view",
    "REGISTRY_ENV": "_registry",
    "PullResult": "_registry",
    "PushResult": "_registry",
    "choose_compression": "_registry",
    "parse_reference": "_registry",
    "pull_variant": "_registry",
    "push_variant": "_registry",
    "SharedMatch": "_team",
    "find_shared": "_team",
    "WheelSource": "_wheel",
    "check_wheel": "_wheel",
}

__all__ = [
    "MIRROR_ENV",
    "REGISTRY_ENV",
    "DownloadPlan",
    "ProgressCallback",
    "PullResult",
    "PushResult",
    "SharedMatch",
    "WheelSource",
    "check_download_target",
    "check_wheel",
    "choose_compression",
    "find_shared",
    "install_cpu_view",
    "install_dir",
    "install_wheel",
    "local_wheel",
    "parse_reference",
    "plan_download",
    "pull_variant",
    "push_variant",
    "run_download",
    "unresolved_libraries",
    "wheel_source",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
