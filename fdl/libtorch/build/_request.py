"""What the user asked for: the ``libtorch.build`` values of the merged manifest (recipe <
fdl.yml and overlays < the command line's options) as typed settings.

Every value remembers where it came from (``--archs``, ``fdl.ci.yml:7:5``, ``recipe
pascal-blackwell``), so a plan error can point at the line to change.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from fdl.errors import FdlError, Location, ManifestError, UsageError
from fdl.libtorch.build._dist import DistSettings
from fdl.manifest.sections.libtorch_build import (
    BACKENDS,
    CACHES,
    BuildSetting,
    build_fields,
    build_settings,
    build_spec,
)

__all__ = [
    "BACKENDS",
    "CACHES",
    "BuildRequest",
    "BuildSetting",
    "Setting",
    "build_fields",
    "build_settings",
    "build_spec",
    "located_error",
    "request_from_mapping",
]

T = TypeVar("T")


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

    ``switches`` and ``cache_settings`` merge key by key across layers. ``cache`` is the
    cache's kind; ``cache_dist`` the sccache-dist farm of ``cache: {kind, dist}``.
    """

    archs: Setting[str] | None = None
    cpu: Setting[bool] | None = None
    cuda: Setting[str] | None = None
    torch: Setting[str] | None = None
    backend: Setting[str] | None = None
    jobs: Setting[int] | None = None
    disk_gb: Setting[int] | None = None
    ptx: Setting[bool] | None = None
    flash_attention: Setting[bool] | None = None
    cache: Setting[str] | None = None
    cache_dist: Setting[DistSettings] | None = None
    recipe: Setting[str] | None = None
    source: Setting[Path] | None = None
    base_image: Setting[str] | None = None
    name: Setting[str] | None = None
    activate: Setting[bool] | None = None
    offline: Setting[bool] | None = None
    fetch_only: Setting[bool] | None = None
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
        elif key == "cache" and isinstance(value, Mapping):
            values.update(_cache_values(value, origin_of, base_dir))
        elif key == "source":
            path = Path(os.path.expanduser(str(value)))
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            values[key] = Setting(path, text, location)
        elif key in {f.name for f in fields(BuildRequest)}:
            values[key] = Setting(value, text, location)
    return BuildRequest(**values)


def _cache_values(
    value: Mapping[str, Any], origin_of: OriginOf, base_dir: Path | None
) -> dict[str, Setting[Any]]:
    """``cache: {kind, dist}`` as the ``cache`` and ``cache_dist`` settings."""
    out: dict[str, Setting[Any]] = {}
    kind_path = ("cache", "kind")
    text, location = origin_of(kind_path if "kind" in value else ("cache",))
    out["cache"] = Setting(str(value.get("kind") or "sccache"), text, location)
    dist = value.get("dist")
    if dist:
        auth = dist.get("auth") or {}
        token_file = auth.get("token_file")
        path = None
        if token_file:
            path = Path(os.path.expanduser(str(token_file)))
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
        text, location = origin_of(("cache", "dist"))
        settings = DistSettings(str(dist["scheduler"]), auth.get("token_env"), path, text)
        out["cache_dist"] = Setting(settings, text, location)
    return out


def located_error(setting: Setting[Any] | None, message: str, hint: str | None) -> FdlError:
    """An error about a setting: a ManifestError at its file position, else a UsageError."""
    if setting is not None and setting.location is not None:
        return ManifestError(message, hint=hint, location=setting.location)
    prefix = f"{setting.origin}: " if setting is not None and setting.origin.startswith("-") else ""
    return UsageError(prefix + message, hint=hint)
