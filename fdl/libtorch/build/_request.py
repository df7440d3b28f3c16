"""What the user asked for: CLI flags over ``libtorch.build`` in fdl.yml over a recipe.

Every value remembers where it came from (``--archs``, ``fdl.ci.yml:7:5``, ``recipe
pascal-blackwell``), so a plan error can point at the line to change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from fdl.errors import FdlError, Location, ManifestError, UsageError
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

__all__ = [
    "BACKENDS",
    "CACHES",
    "BuildRequest",
    "Setting",
    "build_fields",
    "build_spec",
    "located_error",
    "merge_requests",
    "request_from_mapping",
]

T = TypeVar("T")
BACKENDS = ("auto", "docker", "native")
CACHES = ("ccache", "sccache", "none")
SWITCH_NAME = r"(USE|BUILD)_[A-Z0-9_]+|CMAKE_BUILD_TYPE|CMAKE_[A-Z0-9_]+"
CACHE_SETTING = r"(SCCACHE|CCACHE)_[A-Z0-9_]+"


@dataclass(frozen=True)
class Setting(Generic[T]):
    """A requested value and where it came from.

    Attributes:
        value: The value.
        origin: For people: ``--archs``, ``fdl.yml:12:5``, ``recipe pascal-blackwell``.
        location: The manifest or recipe position, when it came from a file.
    """

    value: T
    origin: str
    location: Location | None = None


@dataclass(frozen=True)
class BuildRequest:
    """Everything a build can be asked for; None means "not said, use the default".

    ``switches`` and ``cache_settings`` merge key by key across layers.
    """

    archs: Setting[str] | None = None
    cpu: Setting[bool] | None = None
    cuda: Setting[str] | None = None
    torch: Setting[str] | None = None
    backend: Setting[str] | None = None
    jobs: Setting[int] | None = None
    ptx: Setting[bool] | None = None
    flash_attention: Setting[bool] | None = None
    cache: Setting[str] | None = None
    recipe: Setting[str] | None = None
    source: Setting[Path] | None = None
    base_image: Setting[str] | None = None
    name: Setting[str] | None = None
    activate: Setting[bool] | None = None
    fresh: Setting[bool] | None = None
    switches: Mapping[str, Setting[str]] = field(default_factory=dict)
    cache_settings: Mapping[str, Setting[str]] = field(default_factory=dict)

    def value(self, name: str, default: Any = None) -> Any:
        """The value of setting ``name``, or ``default`` when it was not given."""
        setting = getattr(self, name)
        return default if setting is None else setting.value

    def provenance(self) -> dict[str, dict[str, str]]:
        """``{name: {"value": ..., "origin": ...}}`` for every setting given (for --json)."""
        result: dict[str, dict[str, str]] = {}
        for item in fields(self):
            current = getattr(self, item.name)
            if isinstance(current, Setting):
                result[item.name] = {"value": str(current.value), "origin": current.origin}
            elif isinstance(current, Mapping):
                for key, setting in sorted(current.items()):
                    result[f"{item.name}.{key}"] = {
                        "value": setting.value,
                        "origin": setting.origin,
                    }
        return result


def merge_requests(*layers: BuildRequest) -> BuildRequest:
    """Layers lowest first: a later layer's settings replace earlier ones."""
    merged = BuildRequest()
    for layer in layers:
        updates: dict[str, Any] = {}
        for item in fields(layer):
            current = getattr(layer, item.name)
            if isinstance(current, Mapping):
                if current:
                    updates[item.name] = {**getattr(merged, item.name), **current}
            elif current is not None:
                updates[item.name] = current
        merged = replace(merged, **updates)
    return merged


# --- the schema of libtorch.build and of recipes ---------------------------------------------


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


# --- turning a checked mapping into a request ------------------------------------------------

OriginOf = Callable[[tuple[str, ...]], tuple[str, Location | None]]


def request_from_mapping(
    data: Mapping[str, Any], origin_of: OriginOf, *, base_dir: Path | None = None
) -> BuildRequest:
    """A request from a validated ``libtorch.build`` mapping or recipe.

    Args:
        data: The normalised values (None values are "not set").
        origin_of: Where the value at a key path was written: (text, location).
        base_dir: Where relative ``source`` paths start (the manifest's directory).
    """
    values: dict[str, Any] = {}
    for key, value in data.items():
        if value is None or key == "description":
            continue
        text, location = origin_of((key,))
        if key in ("switches", "cache_settings"):
            values[key] = {
                str(k): Setting(str(v), *origin_of((key, str(k))))
                for k, v in value.items()
                if v is not None
            }
        elif key == "source":
            path = Path(str(value)).expanduser()
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            values[key] = Setting(path, text, location)
        elif key in {f.name for f in fields(BuildRequest)}:
            values[key] = Setting(value, text, location)
    return BuildRequest(**values)


def located_error(setting: Setting[Any] | None, message: str, hint: str | None) -> FdlError:
    """An error about a setting: a ManifestError at its file position, else a UsageError."""
    if setting is not None and setting.location is not None:
        return ManifestError(message, hint=hint, location=setting.location)
    prefix = f"{setting.origin}: " if setting is not None and setting.origin.startswith("-") else ""
    return UsageError(prefix + message, hint=hint)
