"""``libtorch.build``: defaults of ``fdl libtorch build`` (an extension of ``libtorch:``).

Only schema here (no build machinery is imported), so loading a manifest stays fast;
:mod:`fdl.libtorch.source._request` turns the validated values into a request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fdl.manifest.schema import (
    Bool,
    Checker,
    Enum,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Spec,
    Str,
    Version,
)

if TYPE_CHECKING:
    from typing import Any

__all__ = ["BACKENDS", "CACHES", "FIELDS", "build_fields", "build_spec"]

BACKENDS = ("auto", "docker", "native")
CACHES = ("ccache", "sccache", "none")
SWITCH_NAME = r"(USE|BUILD)_[A-Z0-9_]+|CMAKE_BUILD_TYPE|CMAKE_[A-Z0-9_]+"
CACHE_SETTING = r"(SCCACHE|CCACHE)_[A-Z0-9_]+"


class ArchText(Spec):
    """An arch list: ``"6.1;12.0"``, ``[6.1, "12.0+PTX"]`` or a number (``8.6``)."""

    def __init__(self, description: str = "") -> None:
        self.description = description
        self._inner = OneOf(Version(), Str(), ListOf(OneOf(Version(), Str())))

    def check(self, node: Any, path: tuple[str, ...], checker: Checker) -> Any:
        value = self._inner.check(node, path, checker)
        if isinstance(value, list):
            return ";".join(str(v) for v in value if v is not None)
        return value

    def type_name(self) -> str:
        return 'an arch list (e.g. "6.1;12.0" or [sm_61, sm_120])'

    def json_schema(self) -> dict[str, Any]:
        item = {"type": ["string", "number"]}
        return self._doc({"anyOf": [item, {"type": "array", "items": item}]})


class SwitchValue(Spec):
    """A build switch value: ``0``/``1``, ``true``/``false``, ``ON``/``OFF`` or text."""

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, node: Any, path: tuple[str, ...], checker: Checker) -> Any:
        from fdl.manifest._nodes import ScalarNode

        if not isinstance(node, ScalarNode) or node.value is None:
            checker.wrong_type(node, path, self)
            return None
        if isinstance(node.value, bool):
            return "1" if node.value else "0"
        return node.text

    def type_name(self) -> str:
        return "a switch value (0, 1, ON, OFF, true, false)"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"type": ["string", "integer", "boolean"]})


def build_fields(*, recipe: bool = False) -> dict[str, Spec]:
    """The keys of ``libtorch.build`` (``recipe=True``: the keys a recipe file may set)."""
    specs: dict[str, Spec] = {
        "archs": ArchText(
            "GPU archs: 6.1;12.0, sm_61,sm_120, 61 120, 12.0a, 12.0+PTX, Pascal, Blackwell "
            "(default: the GPUs detected on this machine)."
        ),
        "cpu": Bool("Build without CUDA (USE_CUDA=0)."),
        "cuda": Version("CUDA toolkit (default: the newest that compiles every arch)."),
        "torch": Version("PyTorch release to build (default: the newest known)."),
        "backend": Enum(BACKENDS, "Where to build: docker, native or auto."),
        "jobs": Int("Parallel compile jobs (default: what cores and RAM allow).", minimum=1),
        "ptx": Bool("Add PTX of the newest arch (runs on future GPUs through the driver's JIT)."),
        "flash_attention": Bool("Build the flash-attention kernels (~5 GB RAM per job)."),
        "cache": Enum(CACHES, "Compiler cache: ccache, sccache or none."),
        "cache_settings": MapOf(
            Str(),
            "Compiler cache settings passed to the build (SCCACHE_REDIS_ENDPOINT, "
            "SCCACHE_BUCKET, SCCACHE_GCS_BUCKET, CCACHE_DIR ...).",
            key_pattern=CACHE_SETTING,
            key_example="SCCACHE_REDIS_ENDPOINT",
        ),
        "switches": MapOf(
            SwitchValue(),
            "PyTorch build switches (USE_*, BUILD_*, CMAKE_*), e.g. USE_DISTRIBUTED: 0.",
            key_pattern=SWITCH_NAME,
            key_example="USE_DISTRIBUTED",
        ),
        "base_image": Str(
            "Docker base image (default: nvidia/cuda:<X.Y.Z>-cudnn-devel-ubuntu<V>)."
        ),
    }
    if recipe:
        specs["description"] = Str("What the recipe builds, one line.")
        return specs
    specs.update(
        {
            "recipe": Str("A recipe name (recipes/<name>.yml, built in or in the project)."),
            "source": Str("An existing PyTorch checkout to build (relative to fdl.yml)."),
            "name": Str(
                "Variant name under builds/ (default: from the archs, e.g. sm61-sm120).",
                pattern=r"[A-Za-z0-9][A-Za-z0-9._+-]*",
                example="sm61-sm120",
            ),
            "activate": Bool("Make the result the active variant (default: true)."),
        }
    )
    return specs


def build_spec() -> Obj:
    """The ``libtorch.build`` section of fdl.yml."""
    return Obj(build_fields(), description="Source builds: `fdl libtorch build` defaults.")


FIELDS: dict[str, Spec] = {"build": build_spec()}
