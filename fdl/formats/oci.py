"""OCI images, read and written without a docker engine: references
(``host[:port]/name[:tag|@digest]``), layers (deterministic tars, gzip or zstd), image
configs and manifests, and the checks a pulled image passes before any of it is used.

Pushing writes each layer as a tar of sorted entries (owner 0, time 0) under one top
folder, so the same tree always gives the same digests. Pulling checks every layer's
descriptor (media type, sha256 digest, size limit) before a byte is fetched, the config
against the manifest (a diff_id per layer, labels equal to the annotations of a prefix),
each layer's tar against its diff_id (decompressed within a bound), extracts it with
:func:`fdl.archive.safe_extract_tar`'s rules, and merges the layers without whiteouts,
overlaps or links that escape the merged tree. Nothing here knows what a libtorch is:
:mod:`fdl.libtorch.sources` adds its annotations and reads them back.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import tarfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fdl._text import hide_credentials, printable
from fdl.archive import safe_extract_tar
from fdl.errors import EnvironmentProblem, UsageError
from fdl.net import MAX_LAYER, MAX_RATIO, RATIO_FLOOR, is_digest, is_tag

__all__ = [
    "ACCEPT",
    "ARCHITECTURES",
    "DOCKER_MANIFEST",
    "LAYER_TYPES",
    "OCI_CONFIG",
    "OCI_MANIFEST",
    "ImageMismatch",
    "LayerBlob",
    "Reference",
    "check_config",
    "compressor",
    "image_config",
    "image_manifest",
    "layer_descriptors",
    "parse_reference",
    "unpack_layers",
    "write_layer",
]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = (OCI_MANIFEST, DOCKER_MANIFEST)
# A tar unpacked from a layer: never more than any libtorch (fdl.archive's limit).
_TAR_LIMIT = 32 << 30
# The OCI distribution spec's grammar of a repository name, and a registry host[:port].
_REPOSITORY = re.compile(
    r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*"
)
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
)
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
LAYER_TYPES = {"gzip": GZIP_LAYER, "zstd": ZSTD_LAYER}
ZSTD_LEVEL = 3  # BuildKit's default for compression=zstd, as fdl deploy pushes
# ELF e_machine -> the OCI platform's architecture.
ARCHITECTURES = {62: "amd64", 183: "arm64", 21: "ppc64le", 22: "s390x"}


class ImageMismatch(EnvironmentProblem):
    """What a pulled image holds is not what its manifest, config or annotations say."""


@dataclass(frozen=True)
class LayerBlob:
    """One compressed layer written to disk."""

    path: Path
    media_type: str
    digest: str  # sha256 of the compressed blob
    diff_id: str  # sha256 of the tar
    size: int


@dataclass(frozen=True)
class Reference:
    """``host[:port]/namespace/name`` with a tag or a digest."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def repo(self) -> str:
        return f"{self.host}/{self.repository}"

    def __str__(self) -> str:
        if self.digest:
            return f"{self.repo}@{self.digest}"
        return f"{self.repo}:{self.tag}" if self.tag else self.repo


def parse_reference(text: str, *, repository_only: bool = False) -> Reference:
    """``127.0.0.1:5000/team/libtorch[:tag|@sha256:...]``, by the OCI grammar of names,
    tags and digests. Credentials in the address (``user:token@host``) are refused and
    never shown: fdl reads them from the docker config.

    Raises:
        UsageError: no registry host, a name, tag or digest outside the grammar, or a tag or
            digest where only a repository is wanted.
    """
    text = text.strip()
    shown = repr(hide_credentials(text, words=False))
    host, sep, rest = text.partition("/")
    example = "127.0.0.1:5000/team/libtorch"
    authority = text.split("://", 1)[-1].partition("/")[0]
    if "@" in authority:
        bare = printable(authority.rpartition("@")[2], 100)
        raise UsageError(
            f"{shown} holds credentials (user:secret@host); fdl never takes them from an address",
            hint=f"remove them and log in once instead: docker login {bare} (fdl reads the "
            "docker config's credentials)",
        )
    if not sep or not rest or not ("." in host or ":" in host or host == "localhost"):
        raise UsageError(
            f"{shown} names no registry host",
            hint=f"write host[:port]/namespace/name, such as {example}",
        )
    if not _HOST.fullmatch(host):
        raise UsageError(
            f"{shown}: {host!r} is not a registry host[:port]", hint=f"such as {example}"
        )
    digest = None
    if "@" in rest:
        rest, _, digest = rest.partition("@")
        if not is_digest(digest):
            raise UsageError(
                f"{shown}: {digest!r} is not a digest (sha256: and 64 hex digits)",
                hint=f"copy the digest that push printed, such as {example}@sha256:<64 hex>",
            )
    tag = None
    name, sep, maybe = rest.rpartition(":")
    if sep and "/" not in maybe:
        rest, tag = name, maybe
        if not is_tag(tag):
            raise UsageError(
                f"{shown}: {tag!r} is not a tag ([a-zA-Z0-9_][a-zA-Z0-9._-], at most 128)",
                hint=f"such as {example}:2.10.0-cu129",
            )
    if not _REPOSITORY.fullmatch(rest):
        raise UsageError(
            f"{shown}: {rest!r} is not a repository name (lower case, a/b/c)",
            hint=f"such as {example}",
        )
    if repository_only and (tag or digest):
        raise UsageError(
            f"{shown} names an image; a repository is wanted here",
            hint=f"drop the tag: {host}/{rest}",
        )
    return Reference(host, rest, tag, digest)


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


def image_manifest(
    config: bytes, layers: list[LayerBlob], annotations: Mapping[str, str]
) -> dict[str, Any]:
    """The OCI image manifest of ``config`` (its bytes) and ``layers``."""
    return {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": OCI_CONFIG,
            "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
            "size": len(config),
        },
        "layers": [
            {"mediaType": layer.media_type, "digest": layer.digest, "size": layer.size}
            for layer in layers
        ],
        "annotations": dict(annotations),
    }


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


def write_layer(tree: Path, names: list[str], dest: Path, method: str, *, prefix: str) -> LayerBlob:
    """Write the entries ``names`` of ``tree`` (recursively) as a compressed tar layer,
    under ``prefix/``."""
    wrap = compressor(method)
    with dest.open("wb") as handle:
        blob = _Hashing(handle)
        packed = wrap(blob)  # type: ignore[arg-type]  # a writable stream is all it needs
        raw: Any = _Hashing(packed)
        with tarfile.open(fileobj=raw, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            for path in _entries(tree, names):
                member = archive.gettarinfo(str(path), f"{prefix}/{path.relative_to(tree)}")
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


# -- reading images back ----------------------------------------------------------------


def layer_descriptors(manifest: Mapping[str, Any], where: str) -> list[tuple[str, int]]:
    """(digest, size) of every layer, each checked before any is fetched: a gzip or zstd
    tar, a sha256 digest, a size within ``$FDL_REGISTRY_MAX_LAYER``.

    Raises:
        ImageMismatch: a layer that is none of these.
    """
    most = MAX_LAYER.value()
    found: list[tuple[str, int]] = []
    for number, layer in enumerate(manifest["layers"]):
        if not isinstance(layer, dict) or layer.get("mediaType") not in LAYER_TYPES.values():
            kind = layer.get("mediaType") if isinstance(layer, dict) else layer
            raise ImageMismatch(
                f"layer {number + 1} of {where} is {printable(repr(kind), 100)}, "
                "not a gzip or zstd tar",
                hint="push the variant with fdl libtorch push",
            )
        digest, size = layer.get("digest"), layer.get("size")
        if not (isinstance(digest, str) and digest.startswith("sha256:") and is_digest(digest)):
            raise ImageMismatch(f"layer {number + 1} of {where} has no sha256 digest")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ImageMismatch(f"layer {number + 1} of {where} has no valid size")
        if size > most:
            raise ImageMismatch(
                f"layer {number + 1} of {where} is {size:,} bytes; fdl fetches "
                f"layers of at most {most:,}",
                hint=MAX_LAYER.hint(most),
            )
        found.append((digest, size))
    return found


def check_config(
    config: object, manifest: Mapping[str, Any], where: str, prefix: str
) -> dict[str, Any]:
    """The image config (parsed JSON), checked against its ``manifest``: diff_ids for every
    layer, and the config's labels starting with ``prefix`` equal to the manifest's
    annotations that do.

    Raises:
        ImageMismatch: not an OCI image config, or one that does not match.
    """
    rootfs = config.get("rootfs") if isinstance(config, dict) else None
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    settings = config.get("config") if isinstance(config, dict) else None
    labels = (settings.get("Labels") if isinstance(settings, dict) else None) or {}
    if (
        not isinstance(config, dict)
        or not isinstance(diff_ids, list)
        or not all(isinstance(d, str) and is_digest(d) for d in diff_ids)
        or not isinstance(settings or {}, dict)
        or not isinstance(labels, dict)
    ):
        raise ImageMismatch(f"the config of {where} is not an OCI image config")
    if len(diff_ids) != len(manifest["layers"]):
        raise ImageMismatch(
            f"the config of {where} lists {len(diff_ids)} layers, its manifest "
            f"{len(manifest['layers'])}",
            hint="the image is damaged; push the variant again",
        )
    annotations = manifest.get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    ours = {k: v for k, v in annotations.items() if str(k).startswith(prefix)}
    theirs = {k: v for k, v in labels.items() if str(k).startswith(prefix)}
    if ours != theirs:
        differ = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        raise ImageMismatch(
            f"{where}: the manifest's annotations and the config's labels differ "
            f"({printable(', '.join(differ))})",
            hint="the image was altered after fdl pushed it; push the variant again",
        )
    return dict(config)


def unpack_layers(
    blobs: list[Path],
    diff_ids: list[str],
    staging: Path,
    where: str,
    say: Callable[[str], None],
    *,
    prefix: str,
) -> None:
    """Each layer: decompressed to a tar (its sha256 checked against the diff_id),
    extracted safely (``prefix/`` stripped), and merged into ``staging``; then the merged
    tree's links are checked.

    Raises:
        ImageMismatch: a layer that is not what the config names, overlaps another, deletes
            (whiteouts), or links out of the merged tree.
        ArchiveError: a tar :func:`fdl.archive.safe_extract_tar` refuses.
    """
    staging.mkdir()
    for number, (blob, diff_id) in enumerate(zip(blobs, diff_ids, strict=True)):
        say(f"unpacking layer {number + 1}/{len(blobs)}")
        tar = blob.with_name(blob.name + ".tar")
        try:
            if _decompress(blob, tar, _unpacked_bound(blob.stat().st_size)) != diff_id:
                raise ImageMismatch(
                    f"layer {number + 1} of {where} does not unpack to the tar its config "
                    f"names ({diff_id})",
                    hint="the image was altered after fdl pushed it; push the variant again",
                )
            extracted = staging.parent / f"layer-{number}"
            safe_extract_tar(tar, extracted, strip_prefix=prefix)
        finally:
            tar.unlink(missing_ok=True)
        _merge(extracted, staging, where)
        shutil.rmtree(extracted, ignore_errors=True)
    _check_links(staging, where)


def _unpacked_bound(size: int) -> int:
    """How large the tar of a layer of ``size`` bytes may be: ``$FDL_REGISTRY_MAX_RATIO``
    times its size (at least RATIO_FLOOR, at most _TAR_LIMIT)."""
    return min(_TAR_LIMIT, max(RATIO_FLOOR, size * MAX_RATIO.value()))


def _decompress(blob: Path, tar: Path, bound: int = _TAR_LIMIT) -> str:
    """Decompress a gzip or zstd layer to ``tar`` (at most ``bound`` bytes); the tar's
    sha256."""
    import gzip

    with blob.open("rb") as handle:
        magic = handle.read(4)
        handle.seek(0)
        if magic[:2] == b"\x1f\x8b":
            reader: Any = gzip.GzipFile(fileobj=handle)
        elif magic == b"\x28\xb5\x2f\xfd":
            compressor("zstd")  # the same message when zstandard is missing
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(handle)
        else:
            raise ImageMismatch(f"{blob.name} is neither gzip nor zstd")
        digest = hashlib.sha256()
        written = 0
        try:
            with tar.open("wb") as out:
                while chunk := reader.read(1 << 20):
                    written += len(chunk)
                    if written > bound:
                        ratio = MAX_RATIO.value()
                        raise ImageMismatch(
                            f"{blob.name} ({blob.stat().st_size:,} bytes) unpacks to more than "
                            f"{bound:,} bytes",
                            hint="the image is damaged or malicious; nothing was installed"
                            + (
                                ""
                                if bound == _TAR_LIMIT
                                else f". A layer may unpack to {ratio} times its size: "
                                + MAX_RATIO.hint(ratio)
                            ),
                        )
                    digest.update(chunk)
                    out.write(chunk)
        except (OSError, EOFError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise
            raise ImageMismatch(f"{blob.name} is not a valid compressed layer ({exc})") from None
        except Exception as exc:  # zstandard.ZstdError
            if type(exc).__name__ != "ZstdError":
                raise
            raise ImageMismatch(f"{blob.name} is not a valid zstd layer ({exc})") from None
    return f"sha256:{digest.hexdigest()}"


def _merge(source: Path, dest: Path, where: str) -> None:
    """Move ``source``'s entries into ``dest``; directories merge, files never overlap, and
    whiteouts (``.wh.*``: a layer deleting another's files) are refused."""
    for entry in sorted(source.iterdir()):
        if entry.name.startswith(".wh."):
            raise ImageMismatch(
                f"{where}: a layer deletes {entry.name[4:]!r} (whiteout); fdl does not push those",
                hint="push the variant with fdl libtorch push",
            )
        other = dest / entry.name
        if not os.path.lexists(other):
            os.rename(entry, other)
        elif (
            other.is_dir() and not other.is_symlink() and entry.is_dir() and not entry.is_symlink()
        ):
            _merge(entry, other, where)
        else:
            raise ImageMismatch(f"{where}: two layers hold {entry.name!r}")


def _check_links(tree: Path, where: str) -> None:
    """Refuse a merged tree with a link that resolves outside it. Each layer's links were
    checked alone; links that only escape together (``lib/escape -> x1/../..`` in one
    layer, ``x1 -> .`` in another) show only here, in the merged tree."""
    root = os.path.realpath(tree)
    for directory, subdirs, files in os.walk(tree):
        for name in [*subdirs, *files]:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                continue
            resolved = os.path.realpath(path)
            if resolved != root and not resolved.startswith(root + os.sep):
                relative = os.path.relpath(path, tree)
                raise ImageMismatch(
                    f"{where}: once its layers are merged, the link {printable(relative, 120)} "
                    f"-> {printable(os.readlink(path), 120)} resolves outside the variant",
                    hint="refusing the variant (its layers build a link out of the tree "
                    "together); nothing was installed",
                )
