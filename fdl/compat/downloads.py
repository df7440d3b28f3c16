"""Official libtorch downloads: URLs for a (torch version, variant, platform, channel).

Read from ``fdl/data/compat/libtorch.yaml``; the file name rules change with the version
(before 2.8 the cxx11 ABI zip was ``libtorch-cxx11-abi-shared-with-deps-...``; from 2.8 on
only cxx11 is published, as ``libtorch-shared-with-deps-...``).
"""

from __future__ import annotations

import platform as _platform
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from fdl.compat._data import in_range, load_table
from fdl.compat.pytorch import release, resolve_torch_version
from fdl.errors import UsageError

__all__ = [
    "ArchiveLayout",
    "archive_layout",
    "current_platform",
    "libtorch_filename",
    "libtorch_platforms",
    "libtorch_url",
    "needs_user_agent",
]

CHANNELS = ("release", "test", "nightly")


@dataclass(frozen=True)
class ArchiveLayout:
    """What an official libtorch zip contains.

    Attributes:
        top: The single top-level directory (``libtorch``).
        dirs: Its sub-directories (``lib``, ``include``, ...).
        version_file: File holding ``2.8.0+cu128``, relative to ``top``.
        hash_file: File holding the PyTorch git commit.
        library: The library whose presence proves the tree (``lib/libtorch.so``).
    """

    top: str
    dirs: tuple[str, ...]
    version_file: str
    hash_file: str
    library: str


def _table() -> Mapping[str, Any]:
    return load_table("libtorch")


def libtorch_platforms() -> tuple[str, ...]:
    """Platforms with official libtorch zips (``linux-x86_64``, ...)."""
    return tuple(_table()["platforms"])


def current_platform() -> str:
    """This machine's platform name in the table's terms (``linux-x86_64``)."""
    system = _platform.system().lower()
    machine = _platform.machine().lower()
    machine = {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)
    names = {"darwin": "macos"}
    return f"{names.get(system, system)}-{machine}"


def _platform_entry(name: str) -> Mapping[str, Any]:
    entry = _table()["platforms"].get(name)
    if entry is None:
        raise UsageError(
            f"no official libtorch archive for {name} (download.pytorch.org has them for "
            f"{', '.join(libtorch_platforms())})",
            hint="install it from the PyPI torch wheel of this platform: fdl libtorch install "
            "--from-wheel --torch VERSION (on Linux arm64 it is a CUDA build)",
        )
    return dict(entry)


def libtorch_filename(
    version: str, variant: str, *, platform: str = "linux-x86_64", abi: str = "cxx11"
) -> str:
    """The zip's file name for a full ``version`` (``2.8.0``), with ``+`` written ``%2B``.

    Raises:
        UsageError: unknown platform, or no zip with that ABI for the version.
    """
    entry = _platform_entry(platform)
    if entry.get("cpu_only") and variant != "cpu":
        raise UsageError(f"libtorch for {platform} is CPU only", hint="use the cpu variant")
    for rule in entry["files"]:
        if in_range(version, rule.get("since"), rule.get("until")):
            names = rule["abi"]
            if abi not in names:
                raise UsageError(
                    f"libtorch {version} is not published with the {abi} ABI",
                    hint=f"available: {', '.join(names)}",
                )
            return str(names[abi]).format(version=version, variant=variant)
    raise UsageError(f"no libtorch file name known for {version} on {platform}")


def libtorch_url(
    torch_version: str | None = None,
    variant: str = "cpu",
    *,
    platform: str = "linux-x86_64",
    channel: str = "release",
    abi: str = "cxx11",
    base_url: str | None = None,
) -> str:
    """The download URL of an official libtorch zip.

    Example: ``libtorch_url("2.8", "cu128")`` ->
    ``https://download.pytorch.org/libtorch/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip``.

    Args:
        torch_version: ``2.8`` / ``2.8.0``; the newest known when None. For the nightly channel
            None means the ``latest`` zip.
        variant: ``cpu``, ``cu128``, ...; for the release channel it must exist for the version.
        platform: ``linux-x86_64``, ``macos-arm64``, ``windows-x86_64``.
        channel: ``release``, ``test`` (release candidates) or ``nightly``.
        abi: ``cxx11`` (the only one from 2.8 on) or ``pre-cxx11``.
        base_url: A mirror replacing ``https://download.pytorch.org/libtorch``.

    Raises:
        UsageError: unknown channel, platform, variant or ABI for the version.
    """
    table = _table()
    if channel not in CHANNELS:
        raise UsageError(
            f"unknown libtorch channel {channel!r}", hint=f"use one of {', '.join(CHANNELS)}"
        )
    base = (base_url or str(table["base_url"])).rstrip("/")
    if channel == "nightly" and torch_version is None:
        filename = str(_platform_entry(platform).get("nightly_latest", ""))
        if not filename:
            raise UsageError(f"no nightly 'latest' libtorch known for {platform}")
    else:
        if channel == "release":
            version = resolve_torch_version(torch_version)
            if variant.startswith("rocm"):
                from fdl.compat.rocm import rocm_build

                rocm_build(version, variant)
            else:
                release(version).variant(variant)
        else:
            # release candidates and nightlies are newer than the table: take the text as given
            version = (torch_version or resolve_torch_version(None)).split("+", 1)[0]
        filename = libtorch_filename(version, variant, platform=platform, abi=abi)
    return str(table["channels"][channel]).format(base=base, variant=variant, file=filename)


def needs_user_agent() -> bool:
    """True: the CDN answers 403 to Python-urllib's default User-Agent."""
    return bool(_table().get("needs_user_agent", False))


@cache
def archive_layout() -> ArchiveLayout:
    """The layout of an official libtorch zip."""
    archive = _table()["archive"]
    return ArchiveLayout(
        top=str(archive["top"]),
        dirs=tuple(str(d) for d in archive["dirs"]),
        version_file=str(archive["version_file"]),
        hash_file=str(archive["hash_file"]),
        library=str(archive["library"]),
    )
