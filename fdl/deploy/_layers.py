"""How the deployed image's layers are compressed, and fdl's own zstd push.

``compression: gzip`` is ``docker push`` (docker compresses layers with gzip).
``compression: zstd`` pushes the image through the registry API itself: ``docker save``
gives the config and the uncompressed layer tars, each layer is compressed with zstd
(level 3, BuildKit's default for ``compression=zstd``) and uploaded, and an OCI image
manifest with ``application/vnd.oci.image.layer.v1.tar+zstd`` layers is stored under the
tag. It needs no buildx (BuildKit's ``compression=zstd`` exporter does the same at build
time). ``auto`` picks zstd only where the target's runtime is known to pull zstd layers
(``fdl/data/compat/layers.yaml``), and falls back to gzip when the registry refuses the
OCI manifest.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fdl.compat.layers import ZstdPuller, zstd_puller
from fdl.deploy._backend import backend
from fdl.deploy._target import DeployTarget
from fdl.engine import Engine, LineCallback
from fdl.errors import EnvironmentProblem, UsageError
from fdl.net import RegistryClient

__all__ = [
    "OCI_CONFIG",
    "OCI_MANIFEST",
    "ZSTD_LAYER",
    "ZSTD_LEVEL",
    "Compression",
    "PushResult",
    "PushedBlob",
    "ZstdPuller",
    "ZstdUnavailable",
    "choose_compression",
    "push_zstd",
    "split_reference",
]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
ZSTD_LEVEL = 3
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Compression:
    """The compression chosen for a target, and why (in the plan's JSON)."""

    method: str  # gzip | zstd
    requested: str  # gzip | zstd | auto
    reason: str

    @property
    def falls_back(self) -> bool:
        """Whether gzip is pushed instead when the registry refuses zstd (``auto`` only)."""
        return self.requested == "auto" and self.method == "zstd"


def choose_compression(target: DeployTarget) -> Compression:
    """gzip, zstd, or for ``auto`` zstd only where the target's runtime pulls it (pure)."""
    requested = target.compression
    if requested in ("gzip", "zstd"):
        return Compression(requested, requested, f"compression: {requested} in the target")
    puller = zstd_puller(backend(target.kind).puller(target))
    method = "zstd" if puller.pulls_zstd else "gzip"
    return Compression(method, "auto", puller.note)


@dataclass(frozen=True)
class PushedBlob:
    """One blob the manifest references."""

    media_type: str
    digest: str
    size: int

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class PushResult:
    """A pushed image: its manifest digest and the blobs it references."""

    digest: str
    compression: str
    config: PushedBlob | None = None
    layers: tuple[PushedBlob, ...] = ()
    uploaded: int = 0  # blobs the registry did not have yet
    tar_bytes: int = 0  # the layers uncompressed (zstd pushes)

    @property
    def layer_bytes(self) -> int:
        return sum(layer.size for layer in self.layers)


def split_reference(remote: str) -> tuple[str, str, str]:
    """``host[:port]/repo/name:tag`` -> (host, repository, tag)."""
    host, sep, rest = remote.partition("/")
    if not sep or not ("." in host or ":" in host or host == "localhost"):
        raise UsageError(
            f"{remote!r} names no registry host",
            hint="set `registry:` in the deploy target to host[:port]/namespace",
        )
    repository, sep, tag = rest.rpartition(":")
    if not sep or "/" in tag:
        repository, tag = rest, "latest"
    return host, repository, tag


class ZstdUnavailable(EnvironmentProblem):
    """The ``zstandard`` package is not installed."""


def _zstd_compressor() -> Any:
    try:
        import zstandard
    except ModuleNotFoundError:
        raise ZstdUnavailable(
            "zstd layers need the `zstandard` Python package, which is not installed",
            hint="pip install zstandard (in fdl's environment), or `compression: gzip`",
        ) from None
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)


def _uncompressed(source: IO[bytes], size: int) -> tuple[Any, int]:
    """The layer tar of a saved layer, and its size (-1: unknown). Docker's classic store
    saves plain tars; an engine with the containerd image store saves the stored blobs,
    which may be gzip or zstd."""
    import gzip

    magic = source.read(4)
    source.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=source), -1
    if magic == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(source), -1
    return source, size


def _compress(source: IO[bytes], size: int, dest: Path, compressor: Any) -> tuple[str, str, int]:
    """zstd-compress the layer ``source`` into ``dest``: (sha256 of the tar, sha256 of the
    blob, tar size)."""
    raw = hashlib.sha256()
    reader, size = _uncompressed(source, size)
    count = 0

    class _Hashing:
        def __init__(self, handle: IO[bytes]) -> None:
            self.handle = handle
            self.digest = hashlib.sha256()

        def write(self, data: bytes) -> int:
            self.digest.update(data)
            return self.handle.write(data)

    with dest.open("wb") as handle:
        hashing = _Hashing(handle)
        with compressor.stream_writer(hashing, size=size, closefd=False) as writer:
            while chunk := reader.read(_CHUNK):
                raw.update(chunk)
                count += len(chunk)
                writer.write(chunk)
    return f"sha256:{raw.hexdigest()}", f"sha256:{hashing.digest.hexdigest()}", count


def push_zstd(
    engine: Engine,
    local: str,
    remote: str,
    *,
    client: RegistryClient | None = None,
    on_line: LineCallback | None = None,
) -> PushResult:
    """Push ``local`` as ``remote`` with zstd layers under an OCI manifest.

    Each layer's tar is checked against the config's ``rootfs.diff_ids`` while it is
    compressed, so the pushed image unpacks to exactly the local one.

    Raises:
        EnvironmentProblem: the image is not built, or zstandard is missing.
        RegistryError: the registry refused a blob or the manifest.
    """
    if not engine.image_exists(local):
        raise EnvironmentProblem(
            f"the image {local} is not built", hint="build it first: fdl image build train"
        )
    host, repository, tag = split_reference(remote)
    compressor = _zstd_compressor()
    client = client or RegistryClient(
        host,
        repository,
        credentials=engine.registry_credentials(host),
        trusts=lambda other: engine.registry_credentials(other) is not None,
    )
    say: Callable[[str], None] = on_line or (lambda _line: None)
    with tempfile.TemporaryDirectory(prefix="fdl-zstd-") as work:
        archive = engine.save(local, Path(work) / "image.tar")
        with tarfile.open(archive) as saved:
            index = json.loads(_member(saved, "manifest.json").read())[0]
            config_bytes = _member(saved, index["Config"]).read()
            diff_ids = json.loads(config_bytes)["rootfs"]["diff_ids"]
            if len(diff_ids) != len(index["Layers"]):
                raise EnvironmentProblem(
                    f"`docker save {local}` lists {len(index['Layers'])} layers for "
                    f"{len(diff_ids)} diff_ids",
                    hint="rebuild the image (fdl image build) and deploy again",
                )
            layers: list[PushedBlob] = []
            uploaded = 0
            done: dict[str, PushedBlob] = {}
            tar_bytes = 0
            for position, (name, diff_id) in enumerate(zip(index["Layers"], diff_ids, strict=True)):
                if name in done:
                    layers.append(done[name])
                    continue
                member = saved.getmember(name)
                blob = Path(work) / f"layer-{position}.zst"
                raw, digest, size = _compress(_member(saved, name), member.size, blob, compressor)
                tar_bytes += size
                if raw != diff_id:
                    raise EnvironmentProblem(
                        f"layer {position} of {local} is {raw}, but its config says {diff_id}",
                        hint="the saved image is inconsistent; rebuild it and deploy again",
                    )
                pushed = PushedBlob(ZSTD_LAYER, digest, blob.stat().st_size)
                if not client.has_blob(digest):
                    say(f"uploading layer {position + 1}/{len(diff_ids)} ({pushed.size:,} bytes)")
                    client.upload_blob(blob, digest)
                    uploaded += 1
                blob.unlink()
                layers.append(pushed)
                done[name] = pushed
        config_path = Path(work) / "config.json"
        config_path.write_bytes(config_bytes)
        config = PushedBlob(
            OCI_CONFIG, "sha256:" + hashlib.sha256(config_bytes).hexdigest(), len(config_bytes)
        )
        if not client.has_blob(config.digest):
            client.upload_blob(config_path, config.digest)
            uploaded += 1
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config.descriptor(),
        "layers": [layer.descriptor() for layer in layers],
    }
    body = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    digest = client.put_manifest(tag, body, OCI_MANIFEST)
    say(f"pushed {remote} with zstd layers: {digest}")
    return PushResult(digest, "zstd", config, tuple(layers), uploaded, tar_bytes)


def _member(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    handle = archive.extractfile(name)
    if handle is None:
        raise EnvironmentProblem(
            f"the saved image has no file {name}",
            hint="rebuild the image (fdl image build) and deploy again",
        )
    return handle
