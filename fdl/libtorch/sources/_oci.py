"""A libtorch variant as an OCI image: its layers, config, annotations and tag.

The image is a plain OCI image (``docker pull`` and a Dockerfile's ``COPY --from=`` use
it): the tree sits under ``libtorch/`` in three layers (headers and CMake files; the
libraries and everything else; ``variant.json`` and ``.arch``), each a deterministic tar
(sorted, owner 0, time 0), so the same tree always gives the same digests and a second
push uploads nothing. What the variant is (torch, CUDA, cuDNN, the archs and PTX read
from its fatbins, platform, C++ ABI, how it was built) is in the manifest's annotations
and, the same, in the config's labels; :func:`describe` reads it back from either.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fdl._text import printable
from fdl.errors import EnvironmentProblem, UsageError
from fdl.libtorch import variants
from fdl.net import is_tag, read_json

__all__ = [
    "ANNOTATION",
    "LAYER_TYPES",
    "PREFIX",
    "Described",
    "LayerBlob",
    "VariantMismatch",
    "compressor",
    "describe",
    "image_annotations",
    "image_config",
    "layer_groups",
    "platform_of",
    "variant_tag",
    "write_layer",
]

ANNOTATION = "dev.fdl.libtorch."
PREFIX = "libtorch"
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
LAYER_TYPES = {"gzip": GZIP_LAYER, "zstd": ZSTD_LAYER}
ZSTD_LEVEL = 3  # BuildKit's default for compression=zstd, as fdl deploy pushes
_METADATA = (variants.INFO_FILE, variants.ARCH_FILE)
_HEADERS = ("include", "share")
_CHUNK = 1 << 20
# ELF e_machine -> the OCI platform's architecture.
_MACHINES = {62: "amd64", 183: "arm64", 21: "ppc64le", 22: "s390x"}


class VariantMismatch(EnvironmentProblem):
    """What a pulled image holds is not what its annotations say."""


@dataclass(frozen=True)
class LayerBlob:
    """One compressed layer written to disk."""

    path: Path
    media_type: str
    digest: str  # sha256 of the compressed blob
    diff_id: str  # sha256 of the tar
    size: int


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
        library = tree / "lib" / name
        try:
            with library.open("rb") as handle:
                header = handle.read(20)
        except OSError:
            continue
        if len(header) == 20 and header[:4] == b"\x7fELF":
            machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
            if machine in _MACHINES:
                return f"linux/{_MACHINES[machine]}"
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


def image_config(
    labels: Mapping[str, str], layers: list[LayerBlob], platform: str
) -> dict[str, Any]:
    """The OCI image config: platform, the labels, the layers' diff_ids, no command."""
    system, _, architecture = platform.partition("/")
    return {
        "architecture": architecture,
        "os": system,
        "config": {"Labels": dict(sorted(labels.items()))},
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [
            {"created_by": f"fdl libtorch push (layer {n + 1} of {len(layers)})"}
            for n in range(len(layers))
        ],
    }


def layer_groups(tree: Path) -> list[list[str]]:
    """The tree's top-level entries in layers: headers, libraries and the rest, metadata
    (empty groups left out)."""
    names = sorted(entry.name for entry in tree.iterdir())
    headers = [name for name in names if name in _HEADERS]
    metadata = [name for name in names if name in _METADATA]
    rest = [name for name in names if name not in _HEADERS and name not in _METADATA]
    return [group for group in (headers, rest, metadata) if group]


class _Hashing:
    """A write-only stream that hashes and counts what passes through."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        self.sink.write(data)
        return len(data)

    def flush(self) -> None:
        flush = getattr(self.sink, "flush", None)
        if flush is not None:
            flush()


def compressor(method: str) -> Callable[[IO[bytes]], Any]:
    """A function wrapping a binary sink in a compressing writer (``gzip`` or ``zstd``).

    Raises:
        EnvironmentProblem: zstd without the ``zstandard`` package.
    """
    if method == "gzip":
        return lambda sink: gzip.GzipFile(fileobj=sink, mode="wb", mtime=0, compresslevel=6)
    if method != "zstd":
        raise UsageError(f"unknown compression {method!r}", hint="use auto, zstd or gzip")
    try:
        import zstandard
    except ModuleNotFoundError:
        raise EnvironmentProblem(
            "zstd layers need the `zstandard` Python package, which is not installed",
            hint="pip install zstandard (in fdl's environment), or --compression gzip",
        ) from None
    engine = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
    return lambda sink: engine.stream_writer(sink, closefd=False)


def _entries(tree: Path, names: list[str]) -> Iterator[Path]:
    for name in names:
        top = tree / name
        yield top
        if top.is_dir() and not top.is_symlink():
            for directory, subdirs, files in os.walk(top):
                subdirs.sort()
                base = Path(directory)
                for entry in sorted([*subdirs, *files]):
                    yield base / entry


def write_layer(tree: Path, names: list[str], dest: Path, method: str) -> LayerBlob:
    """Write the entries ``names`` of ``tree`` (recursively) as a compressed tar layer."""
    wrap = compressor(method)
    with dest.open("wb") as handle:
        blob = _Hashing(handle)
        packed = wrap(blob)  # type: ignore[arg-type]  # a writable stream is all it needs
        raw: Any = _Hashing(packed)
        with tarfile.open(fileobj=raw, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            for path in _entries(tree, names):
                member = archive.gettarinfo(str(path), f"{PREFIX}/{path.relative_to(tree)}")
                member.mtime = 0
                member.uid = member.gid = 0
                member.uname = member.gname = ""
                member.mode &= 0o755
                if member.isreg():
                    with path.open("rb") as source:
                        archive.addfile(member, source)
                else:
                    archive.addfile(member)
        packed.close()
    return LayerBlob(
        dest,
        LAYER_TYPES[method],
        f"sha256:{blob.hash.hexdigest()}",
        f"sha256:{raw.hash.hexdigest()}",
        blob.size,
    )
