"""Compatibility facts refreshed from the real artefacts (a maintainers' tool).

``python -m fdl.refresh [discover] [--write] [--json] [--metadata-only]
[--no-toolkit-wheels]`` finds by itself what PyPI publishes that the tables lack (torch
releases, CUDA toolkits, Requires-Python, final toolkit releases for the image pins), reads
it with the readers below and prints a minimal diff of ``fdl/data/compat`` with a source per
row (:mod:`fdl.refresh._discover`, :mod:`fdl.refresh._patch`). ``python -m fdl.refresh learn
VERSION`` reads one release newer than the tables the same way (:mod:`fdl.refresh._release`)
into fdl's cache, where :func:`fdl.compat.release` answers for it, labelled as read from
its artefacts on that date.

``python -m fdl.refresh toolkits [VERSION...] [--json]`` downloads NVIDIA's
``nvidia-cuda-nvcc`` wheel of each CUDA toolkit from PyPI (no install), runs its
``ptxas --help`` for the arch list and reads its ``crt/host_config.h`` for the newest
gcc and clang it accepts, then compares them with ``fdl/data/compat/cuda.yaml``. It
prints every difference with the artefact it comes from and exits 1 when there is one
(the drift check of the ``slow`` test).

``python -m fdl.refresh wheels VERSION... [--json] [--metadata-only]`` reads each torch
release's PyPI wheels through HTTP Range requests: the ``METADATA`` pins (CUDA, cuDNN) and,
streamed, the cubins and PTX of ``torch/lib/libtorch_cuda.so``
(:mod:`fdl.refresh._wheel_code`), compared with ``pytorch.yaml``. The parsers are pure and tested on recorded
output; the downloads and the program runs go through ``fdl.runner``.
"""

from __future__ import annotations

from fdl.refresh._learn import Learned, learn_release, newest_release
from fdl.refresh._toolkits import (
    Derived,
    Drift,
    derive_toolkit,
    drift,
    nvcc_wheel_requirement,
    parse_host_limits,
    parse_ptxas_archs,
)

__all__ = [
    "Derived",
    "Drift",
    "Learned",
    "derive_toolkit",
    "drift",
    "learn_release",
    "newest_release",
    "nvcc_wheel_requirement",
    "parse_host_limits",
    "parse_ptxas_archs",
]
