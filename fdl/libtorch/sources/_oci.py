"""A libtorch variant as an OCI image: what its annotations say, its layers and its tag.

The image format is :mod:`fdl.formats.oci`'s (a plain OCI image: ``docker pull`` and a
Dockerfile's ``COPY --from=`` use it). Here is what makes it a variant's: the tree sits
under ``libtorch/`` in three layers (headers and CMake files; the libraries and
everything else; ``variant.json`` and ``.arch``), and what the variant is (torch, CUDA,
cuDNN, the archs and PTX read from its fatbins, platform, C++ ABI, how it was built) is
in the manifest's annotations and, the same, in the config's labels; :func:`describe`
reads it back from either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl._text import printable
from fdl.binaries import elf_machine
from fdl.errors import EnvironmentProblem
from fdl.formats.oci import ARCHITECTURES, ImageMismatch
from fdl.libtorch import variants
from fdl.net import is_tag, read_json

__all__ = [
    "ANNOTATION",
    "PREFIX",
    "Described",
    "VariantMismatch",
    "describe",
    "image_annotations",
    "layer_groups",
    "platform_of",
    "shareable_source",
    "variant_tag",
]

# What a pulled image holds is not what its manifest, config or annotations say.
VariantMismatch = ImageMismatch
ANNOTATION = "dev.fdl.libtorch."
PREFIX = "libtorch"
_METADATA = (variants.INFO_FILE, variants.ARCH_FILE)
_HEADERS = ("include", "share")


@dataclass(frozen=True)
class Described:
    """What an image's annotations say the variant is."""

    torch: str
    cuda: str | None
    cudnn: str | None
    cubins: tuple[str, ...]
    ptx: tuple[str, ...]
    platform: str
    abi: str | None
    built_by: str
    tag: str
    info: dict[str, Any]

    @property
    def covers_text(self) -> str:
        archs = list(self.cubins) + [f"PTX {code}" for code in self.ptx]
        return " ".join(archs) if archs else "CPU only"


# The libraries whose ELF header says the platform, first found first: a CPU view's
# lib/libtorch.so is a GNU ld script (it stands in for the CUDA wheel's libtorch.so), so
# the libraries every libtorch holds come next.
_PLATFORM_LIBRARIES = ("libtorch.so", "libtorch_cpu.so", "libc10.so")


def platform_of(tree: Path) -> str:
    """``linux/amd64``: the architecture read from the ELF header of ``lib/libtorch.so``
    (or, where that is a linker script, of ``libtorch_cpu.so`` or ``libc10.so``)."""
    for name in _PLATFORM_LIBRARIES:
        machine = elf_machine(tree / "lib" / name)
        if machine in ARCHITECTURES:
            return f"linux/{ARCHITECTURES[machine]}"
    raise EnvironmentProblem(
        f"cannot tell the platform of {tree / 'lib'}: none of "
        f"{', '.join(_PLATFORM_LIBRARIES)} is an ELF library fdl knows",
        hint="push a libtorch tree installed by fdl (fdl libtorch list)",
    )


def variant_tag(info: variants.VariantInfo, found: Mapping[str, list[str]]) -> str:
    """What the variant is, as a tag: ``2.10.0-cu129-sm61-sm120`` (``-ptx120`` for PTX,
    ``-precxx11`` for the old ABI)."""
    if not info.torch:
        raise EnvironmentProblem(
            f"the variant {info.name} does not say its torch version",
            hint=f"reinstall it, or check its build-version file: fdl libtorch info {info.name}",
        )
    parts = [info.torch, f"cu{info.cuda.replace('.', '')}" if info.cuda else "cpu"]
    parts += [code.replace("_", "") for code in found.get("cubin", [])]
    parts += [
        code.replace("sm_", "ptx").replace("compute_", "ptx") for code in found.get("ptx", [])
    ]
    if info.abi == "pre-cxx11":
        parts.append("precxx11")
    return "-".join(parts)[:128]


# Source keys that hold a path of the pushing machine: not for the registry (a reader
# learns the pusher's home directory, and the path means nothing on another machine).
_LOCAL_PATHS = ("wheel", "environment", "directory", "source_dir")


def shareable_source(source: Mapping[str, Any]) -> dict[str, Any]:
    """``source`` without the pushing machine's paths: a wheel keeps its file name, a
    ``file:`` URL its last part, other paths go."""
    shared = dict(source)
    for key in _LOCAL_PATHS:
        value = shared.get(key)
        if isinstance(value, str) and "/" in value:
            shared[key] = Path(value).name if key == "wheel" else None
    url = shared.get("url")
    if isinstance(url, str) and url.startswith("file:"):
        shared["url"] = url.rsplit("/", 1)[-1]
    return {key: value for key, value in shared.items() if value is not None}


def _built_by(info: variants.VariantInfo) -> str:
    source = shareable_source(info.source)
    kind = str(source.get("kind") or "unknown")
    details = [
        f"{key} {source[key]}"
        for key in ("recipe", "backend", "commit", "url", "wheel")
        if source.get(key) and isinstance(source[key], (str, int, float))
    ]
    return kind + (f" ({', '.join(details)})" if details else "")


def image_annotations(
    info: variants.VariantInfo, found: Mapping[str, list[str]], *, platform: str, tag: str
) -> dict[str, str]:
    """The manifest's annotations (and the config's labels): what the variant is; no
    URL's user info (a variant.json written before fdl hid it may hold an index token)."""
    from fdl._text import public_url

    record = info.to_json()
    record["source"] = shareable_source(info.source)
    record["archs_found"] = dict(found)
    record.pop("installed_at", None)
    shown = {
        f"{ANNOTATION}torch": info.torch or "",
        f"{ANNOTATION}cuda": info.cuda or "",
        f"{ANNOTATION}cudnn": info.cudnn or "",
        f"{ANNOTATION}archs": " ".join(found.get("cubin", [])),
        f"{ANNOTATION}ptx": " ".join(found.get("ptx", [])),
        f"{ANNOTATION}platform": platform,
        f"{ANNOTATION}abi": info.abi or "",
        f"{ANNOTATION}built-by": _built_by(info),
        f"{ANNOTATION}tag": tag,
        f"{ANNOTATION}variant": json.dumps(record, sort_keys=True, separators=(",", ":")),
        "org.opencontainers.image.title": f"libtorch {tag}",
        "org.opencontainers.image.version": info.torch or "",
    }
    return {key: public_url(value) for key, value in shown.items()}


def describe(found: Mapping[str, Any], where: str) -> Described:
    """Read back what :func:`annotations` wrote (from annotations or config labels). The
    text is the registry's: every value is made printable (:func:`fdl._text.printable`),
    a tag that is not one is dropped, and the variant record must have fdl's shape.

    Raises:
        VariantMismatch: the image is not a libtorch variant pushed by fdl.
    """

    def text(key: str) -> str:
        value = found.get(ANNOTATION + key, "")
        return printable(value, 200) if isinstance(value, str) else ""

    raw = found.get(ANNOTATION + "variant")
    info = read_json(raw.encode("utf-8", "replace")) if isinstance(raw, str) else None
    if not text("torch") or not isinstance(info, dict):
        raise VariantMismatch(
            f"{where} is not a libtorch variant pushed by fdl (no {ANNOTATION}* annotations)",
            hint="push one first: fdl libtorch push VARIANT --to REPO",
        )
    shapes = {"source": dict, "extra": dict, "archs_requested": list}
    for key, shape in shapes.items():
        if info.get(key) is not None and not isinstance(info[key], shape):
            raise VariantMismatch(
                f"{where}: the {ANNOTATION}variant annotation's {key!r} is not a "
                f"{'JSON object' if shape is dict else 'list'}, as fdl writes it",
                hint="the image was not pushed by fdl or was altered; push the variant again "
                "(fdl libtorch push)",
            )
    return Described(
        torch=text("torch"),
        cuda=text("cuda") or None,
        cudnn=text("cudnn") or None,
        cubins=tuple(text("archs").split()),
        ptx=tuple(text("ptx").split()),
        platform=text("platform"),
        abi=text("abi") or None,
        built_by=text("built-by") or "unknown",
        tag=text("tag") if is_tag(text("tag")) else "",
        info=info,
    )


def layer_groups(tree: Path) -> list[list[str]]:
    """The tree's top-level entries in layers: headers, libraries and the rest, metadata
    (empty groups left out)."""
    names = sorted(entry.name for entry in tree.iterdir())
    headers = [name for name in names if name in _HEADERS]
    metadata = [name for name in names if name in _METADATA]
    rest = [name for name in names if name not in _HEADERS and name not in _METADATA]
    return [group for group in (headers, rest, metadata) if group]
