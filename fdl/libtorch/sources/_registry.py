"""Variants shared through an OCI registry: ``fdl libtorch pull`` (and the registry
client and references ``push`` uses, :mod:`fdl.libtorch.sources._push`).

:func:`pull_variant` fetches an image through :class:`fdl.net.RegistryClient` (no docker engine): every blob is
checked against its digest and resumed after an interruption, every layer's tar against
the config's ``diff_ids``, extracted with :func:`fdl.archive.safe_extract_tar`'s rules, and
the tree is put in place (a :class:`FromRegistry` source, through
:func:`~fdl.libtorch.sources.install_source`) only when the archs read from its binaries are
the ones its annotations claim.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._files import file_sha256
from fdl.errors import EnvironmentProblem, FdlError, UsageError
from fdl.formats.oci import (
    ACCEPT,
    Reference,
    check_config,
    layer_descriptors,
    parse_reference,
    unpack_layers,
)
from fdl.libtorch import variants
from fdl.libtorch._install import InstallResult, Target, resolve_target, variant_lock
from fdl.libtorch._scan import read_build_version, scan_device_code
from fdl.libtorch.sources import install_source
from fdl.libtorch.sources._oci import (
    ANNOTATION,
    PREFIX,
    Described,
    VariantMismatch,
    describe,
    platform_of,
)
from fdl.net import (
    MAX_BODY,
    MAX_LAYERS,
    RegistryClient,
    RegistryError,
    is_digest,
    read_json,
)
from fdl.paths import Context

__all__ = [
    "REGISTRY_ENV",
    "FromRegistry",
    "PullResult",
    "Reference",
    "parse_reference",
    "pull_variant",
]

REGISTRY_ENV = "FDL_LIBTORCH_REGISTRY"
Credentials = Callable[[str], "tuple[str, str] | None"]
ClientFactory = Callable[[str, str], RegistryClient]


def default_client(credentials: Credentials) -> ClientFactory:
    """Clients with the credentials docker keeps for each host (a Bearer realm on another
    host gets them only when docker keeps credentials for that host too)."""

    def trusts(other: str) -> bool:
        try:
            return credentials(other) is not None
        except FdlError:
            return False

    return lambda host, repository: RegistryClient(
        host, repository, credentials=credentials(host), trusts=trusts
    )


# -- reading images back ----------------------------------------------------------------


@dataclass(frozen=True)
class RemoteVariant:
    """A variant's image as its manifest describes it (no layer read)."""

    reference: Reference
    digest: str
    described: Described
    manifest: dict[str, Any]

    @property
    def pinned(self) -> str:
        return f"{self.reference.repo}@{self.digest}"


def read_remote(client: RegistryClient, reference: Reference) -> RemoteVariant:
    """The manifest of ``reference`` and what its annotations say (layers not read).

    Raises:
        VariantMismatch: not a variant pushed by fdl, or a manifest fdl does not read.
        RegistryError: the registry refused, or served another digest than asked.
    """
    wanted = reference.digest or reference.tag or "latest"
    served = client.manifest(wanted, ACCEPT)
    if reference.digest and served.digest != reference.digest:
        raise RegistryError(
            f"the registry {reference.host} served {served.digest} for {reference}",
            status=200,
            hint="the registry's storage is damaged or the manifest was tampered with",
        )
    manifest = read_json(served.body)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("layers"), list):
        raise VariantMismatch(
            f"{reference} is not an image manifest fdl reads ({served.media_type})",
            hint="push the variant with fdl libtorch push",
        )
    most = MAX_LAYERS.value()
    if len(manifest["layers"]) > most:
        raise VariantMismatch(
            f"{reference} has {len(manifest['layers'])} layers; fdl reads at most {most} "
            "(it pushes 3)",
            hint=MAX_LAYERS.hint(most),
        )
    found = manifest.get("annotations")
    described = describe(found if isinstance(found, dict) else {}, str(reference))
    return RemoteVariant(reference, served.digest, described, manifest)


# -- pull --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PullResult:
    """A pulled variant: the install, and what came over the network."""

    install: InstallResult
    reference: str
    digest: str
    received: int
    resumed: int
    built_by: str

    def to_json(self) -> dict[str, Any]:
        return {
            **self.install.to_json(),
            "reference": self.reference,
            "digest": self.digest,
            "received_bytes": self.received,
            "resumed_bytes": self.resumed,
            "built_by": self.built_by,
        }


def pull_variant(
    context: Context,
    reference: str,
    *,
    credentials: Credentials,
    cache: Path,
    name: str | None = None,
    activate: bool = True,
    force: bool = False,
    client_factory: ClientFactory | None = None,
    on_bytes: Callable[[int], None] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> PullResult:
    """Install the variant ``reference`` (``host/ns/name:tag`` or ``@sha256:...``).

    Args:
        cache: Where blobs are downloaded (their ``.part`` files survive an interruption,
            and the next pull resumes them); removed once the variant is installed.
        name: The variant name (default: ``builds/<tag>`` for a source build,
            ``precompiled/<tag>`` otherwise).

    Raises:
        RegistryError: a blob or manifest the registry refused, or whose digest is wrong.
        VariantMismatch: the image is not what its annotations say.
        ArchiveError: a layer fdl would not extract.
    """
    ref = parse_reference(reference)
    client = (client_factory or default_client(credentials))(ref.host, ref.repository)
    remote = read_remote(client, ref)
    source = FromRegistry(client, remote, _config(client, remote), cache, on_bytes, on_line)
    variant = name or _free_name(context, source)
    target = resolve_target(context, variant)
    with variant_lock(target, purpose=f"pulling libtorch {variant}"):
        result = install_source(
            context, source, target=target, activate=activate, locked=True, force=force
        )
    return PullResult(
        result, remote.pinned, remote.digest, source.counts["received"],
        source.counts["resumed"], remote.described.built_by,
    )  # fmt: skip


@dataclass
class FromRegistry:
    """A variant pushed to an OCI registry, as its manifest and config describe it: the
    ``registry`` source. Its layers are read by :meth:`populate` (resumed from ``cache``).

    Attributes:
        counts: Bytes ``received`` over the network and ``resumed`` from the cache.
    """

    client: RegistryClient
    remote: RemoteVariant
    config: dict[str, Any]
    cache: Path
    on_bytes: Callable[[int], None] | None = None
    on_line: Callable[[str], None] | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"received": 0, "resumed": 0})

    kind = "registry"

    @property
    def default_name(self) -> str:
        """``builds/<tag>`` for a source build, ``precompiled/<tag>`` otherwise."""
        return default_name(self.remote.described, self.remote.reference)

    def describe(self) -> str:
        described = self.remote.described
        covers = " ".join(described.cubins + described.ptx) or "CPU"
        return f"{self.remote.pinned} (built by {described.built_by}, covers {covers})"

    def is_current(self, path: Path) -> bool:
        """The variant at ``path`` was pulled from the same image (digest)."""
        source = variants.read_info(path, path.name).source
        return bool(source.get("registry", {}).get("digest") == self.remote.digest)

    def refusal(self, target: Target) -> None:
        """None: a pull replaces the variant fdl made there, whichever build it is."""
        return None

    def populate(self, staging: Path) -> variants.VariantInfo:
        say = self.on_line or (lambda _line: None)
        remote, described = self.remote, self.remote.described
        blobs = _fetch_layers(self.client, remote, self.cache, self.on_bytes, self.counts, say)
        diff_ids = self.config["rootfs"]["diff_ids"]
        unpack_layers(blobs, diff_ids, staging, str(remote.reference), say, prefix=PREFIX)
        _check_tree(staging, described, remote.pinned)
        for blob in blobs:
            blob.unlink(missing_ok=True)
        return _info(described, remote, self.default_name)


def default_name(described: Described, ref: Reference) -> str:
    """The name the pusher gave it (``precompiled/cu128``, ``builds/sm61-sm120``), else
    ``builds/<tag>`` for a source build and ``precompiled/<tag>`` otherwise."""
    pushed = described.info.get("name")
    if isinstance(pushed, str):
        try:
            return variants.validate_name(pushed)
        except UsageError:
            pass
    return _tag_name(described, ref)


def _tag_name(described: Described, ref: Reference) -> str:
    kind = (
        "builds" if (described.info.get("source") or {}).get("kind") == "build" else "precompiled"
    )
    tag = described.tag or ref.tag or "pulled"
    return variants.validate_name(f"{kind}/{tag}")


def _free_name(context: Context, source: FromRegistry) -> str:
    """The pusher's name, unless a variant of another origin holds it here (a download of
    one's own called ``precompiled/cu128``): then the tag's, which says what it is."""
    name = source.default_name
    path = context.libtorch_dir / name
    if name in variants.list_variants(context) and not source.is_current(path):
        return _tag_name(source.remote.described, source.remote.reference)
    return name


def _config(client: RegistryClient, remote: RemoteVariant) -> dict[str, Any]:
    """The image config, checked: diff_ids for every layer, labels equal to annotations."""
    descriptor = remote.manifest.get("config")
    digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
    if not isinstance(digest, str) or not is_digest(digest):
        raise VariantMismatch(f"the manifest of {remote.pinned} names no config digest")
    config = read_json(client.blob_bytes(digest, MAX_BODY.value()))
    return check_config(config, remote.manifest, remote.pinned, ANNOTATION)


def _fetch_layers(
    client: RegistryClient,
    remote: RemoteVariant,
    cache: Path,
    on_bytes: Callable[[int], None] | None,
    counts: dict[str, int],
    say: Callable[[str], None],
) -> list[Path]:
    cache.mkdir(parents=True, exist_ok=True)
    layers = layer_descriptors(remote.manifest, remote.pinned)
    _check_room(cache, sum(size for _digest, size in layers), remote.pinned)
    blobs: list[Path] = []
    for number, (digest, size) in enumerate(layers):
        dest = cache / digest.replace(":", "-")
        if (
            dest.is_file()
            and dest.stat().st_size == size
            and f"sha256:{file_sha256(dest)}" == digest
        ):
            counts["resumed"] += size
        else:
            say(f"fetching layer {number + 1}/{len(layers)} ({size:,} bytes)")
            fetched = client.fetch_blob(digest, dest, size=size, on_bytes=on_bytes)
            counts["received"] += fetched.received
            counts["resumed"] += fetched.resumed
        blobs.append(dest)
    return blobs


def _check_room(cache: Path, needed: int, where: str) -> None:
    """Refuse to start a download the disk cannot hold (the layers, then their tars)."""
    free = shutil.disk_usage(cache).free
    if needed > free:
        raise EnvironmentProblem(
            f"{where}: its layers are {needed:,} bytes, and {cache} has {free:,} free",
            hint="free space there, or point FDL_CACHE_DIR at a larger disk",
        )


def _check_tree(tree: Path, described: Described, where: str) -> None:
    """Refuse a tree whose binaries are not what the annotations claim (its links were
    checked as its layers were merged)."""
    scan = scan_device_code(tree)
    found = scan.archs_found() if scan.has_device_code else {}
    cubins, ptx = tuple(found.get("cubin", [])), tuple(found.get("ptx", []))
    if (cubins, ptx) != (described.cubins, described.ptx):
        claimed = " ".join(described.cubins + described.ptx) or "no GPU code"
        has = " ".join(cubins + ptx) or "no GPU code"
        raise VariantMismatch(
            f"{where} claims {claimed} but its libraries hold {has}",
            hint="refusing the variant; push it again from the machine that built it "
            "(fdl libtorch push)",
        )
    platform = platform_of(tree)
    if platform != described.platform:
        raise VariantMismatch(
            f"{where} claims {described.platform} but its libraries are {platform}",
            hint="refusing the variant; push it again (fdl libtorch push)",
        )
    version = read_build_version(tree)
    if version and version.split("+", 1)[0] != described.torch:
        raise VariantMismatch(
            f"{where} claims torch {described.torch} but its build-version says {version}",
            hint="refusing the variant; push it again (fdl libtorch push)",
        )


def _info(described: Described, remote: RemoteVariant, name: str) -> variants.VariantInfo:
    record: Mapping[str, Any] = described.info
    source = dict(record.get("source") or {})
    source["registry"] = {"reference": remote.pinned, "digest": remote.digest}
    if isinstance(record.get("name"), str):
        source["registry"]["pushed_as"] = record["name"]
    requested = record.get("archs_requested")
    return variants.VariantInfo(
        name=name,
        torch=described.torch,
        cuda=described.cuda,
        cudnn=described.cudnn,
        archs_requested=[str(a) for a in requested] if isinstance(requested, list) else [],
        abi=described.abi,
        source=source,
        extra=dict(record.get("extra") or {}),
    )
