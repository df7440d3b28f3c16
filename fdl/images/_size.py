"""How big an image is, layer by layer, and how close to the smallest possible.

The floor of a training image is the base image plus the system packages its profile
asks for (``packages:``, e.g. graphviz for floDl's graphs: their layer as built) plus
the program and the libraries it loads, as the build stage listed them
(``/opt/app/fdl-closure.tsv``): nothing smaller can run the program on that base with
those packages.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.engine import Engine, default_engine
from fdl.errors import FdlError
from fdl.images._render import LISTING
from fdl.images._spec import ImageSpec

__all__ = ["LayerSize", "SizeReport", "parse_listing", "size_report"]


@dataclass(frozen=True)
class LayerSize:
    """One layer: the instruction that made it, its bytes, whether the base made it."""

    created_by: str
    size: int
    in_base: bool


@dataclass(frozen=True)
class SizeReport:
    """An image's size against its base and its floor.

    Attributes:
        image: The image name.
        size: Its bytes (uncompressed, as the daemon counts them).
        base: The base image's name.
        base_size: The base image's bytes.
        layers: Every layer, oldest first.
        closure: (path, bytes) of the program and each library it loads (train images).
        packages: Bytes of the layer that installs the profile's ``packages:`` (0: none).
    """

    image: str
    image_id: str
    size: int
    base: str
    base_size: int
    layers: tuple[LayerSize, ...]
    closure: tuple[tuple[str, int], ...] | None
    packages: int = 0

    @property
    def floor(self) -> int | None:
        """The base, the profile's packages, the program and its closure (None without
        a listing)."""
        if self.closure is None:
            return None
        return self.base_size + self.packages + sum(size for _, size in self.closure)

    @property
    def added(self) -> int:
        """Bytes on top of the base."""
        return self.size - self.base_size

    @property
    def overhead(self) -> float | None:
        """How much bigger than the floor the part above the base is (0.02 = 2%)."""
        floor = self.floor
        if floor is None or floor <= self.base_size:
            return None
        return self.added / (floor - self.base_size) - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "id": self.image_id,
            "size": self.size,
            "base": {"image": self.base, "size": self.base_size},
            "floor": self.floor,
            "packages": self.packages,
            "overhead": self.overhead,
            "layers": [
                {"created_by": layer.created_by, "size": layer.size, "in_base": layer.in_base}
                for layer in self.layers
            ],
            "closure": [{"path": path, "size": size} for path, size in self.closure or ()],
        }


def parse_listing(text: str) -> tuple[tuple[str, int], ...]:
    """``<bytes>\\t<path>`` lines -> ((path, bytes), ...)."""
    entries = []
    for line in text.splitlines():
        size, _, path = line.partition("\t")
        if path and size.strip().isdigit():
            entries.append((path, int(size)))
    return tuple(entries)


def _listing(engine: Engine, image: str, spec: ImageSpec) -> tuple[tuple[str, int], ...] | None:
    if spec.kind != "train":
        return None
    with tempfile.TemporaryDirectory(prefix="fdl-size-") as scratch:
        try:
            engine.copy_out(image, f"{spec.path('app')}/{LISTING}", Path(scratch))
        except FdlError:
            return None  # built by hand from an older Dockerfile: no floor then
        listing = Path(scratch) / LISTING
        if not listing.is_file():
            return None
        return parse_listing(listing.read_text(encoding="utf-8"))


def size_report(
    spec: ImageSpec, *, image: str | None = None, engine: Engine | None = None
) -> SizeReport:
    """Measure the built image of ``spec`` (default name: its tag).

    Raises:
        FdlError: the image or its base is not in the local store.
    """
    chosen = engine or default_engine()
    name = image or spec.tag
    info = chosen.inspect_image(name)
    base = chosen.inspect_image(spec.base)
    shared = len(base.layers)
    layers = tuple(
        LayerSize(layer.created_by, layer.size, index < shared)
        for index, layer in enumerate(info.layers)
    )
    return SizeReport(
        image=name,
        image_id=info.id,
        size=info.size,
        base=spec.base,
        base_size=base.size,
        layers=layers,
        closure=_listing(chosen, name, spec),
        packages=_packages(spec, layers),
    )


def _packages(spec: ImageSpec, layers: tuple[LayerSize, ...]) -> int:
    """The bytes the profile's ``packages:`` add: the final stage installs them in its one
    apt step (train images; the build stage's packages never reach the image)."""
    if spec.kind != "train" or not spec.packages:
        return 0
    return sum(
        layer.size
        for layer in layers
        if not layer.in_base and "apt-get install" in layer.created_by
    )
