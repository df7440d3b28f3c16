"""Variants shared through an OCI registry: ``fdl libtorch push`` and ``pull``.

:func:`push_variant` reads an installed variant (its archs from its binaries, not from its
metadata), writes it as an OCI image (:mod:`fdl.libtorch.sources._oci`) and stores it under a tag
saying what it is; the registry's digest is the reference to share. :func:`pull_variant`
fetches an image through :class:`fdl.net.RegistryClient` (no docker engine): every blob is
checked against its digest and resumed after an interruption, every layer's tar against
the config's ``diff_ids``, extracted with :func:`fdl.archive.safe_extract_tar`'s rules, and
the tree is put in place (a :class:`FromRegistry` source, through
:func:`~fdl.libtorch.sources.install_source`) only when the archs read from its binaries are
the ones its annotations claim.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fdl._text import hide_credentials, printable
from fdl.archive import safe_extract_tar
from fdl.errors import EnvironmentProblem, FdlError, UsageError
from fdl.libtorch import variants
from fdl.libtorch._install import InstallResult, Target, resolve_target, variant_lock
from fdl.libtorch._scan import read_build_version, scan_device_code
from fdl.libtorch.sources import install_source
from fdl.libtorch.sources._oci import (
    ANNOTATION,
    LAYER_TYPES,
    PREFIX,
    Described,
    LayerBlob,
    VariantMismatch,
    compressor,
    describe,
    image_annotations,
    image_config,
    layer_groups,
    platform_of,
    variant_tag,
    write_layer,
)
from fdl.libtorch.sources._pushed import fingerprint, recall_push, remember_push
from fdl.net import (
    MAX_BODY,
    MAX_LAYER,
    MAX_LAYERS,
    MAX_RATIO,
    RATIO_FLOOR,
    RegistryClient,
    RegistryError,
    is_digest,
    is_tag,
    read_json,
)
from fdl.paths import Context

__all__ = [
    "REGISTRY_ENV",
    "FromRegistry",
    "PullResult",
    "PushResult",
    "Reference",
    "choose_compression",
    "parse_reference",
    "pull_variant",
    "push_variant",
]

REGISTRY_ENV = "FDL_LIBTORCH_REGISTRY"
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

Credentials = Callable[[str], "tuple[str, str] | None"]
ClientFactory = Callable[[str, str], RegistryClient]


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


def choose_compression(requested: str) -> tuple[str, str]:
    """(method, why): ``auto`` is zstd when the ``zstandard`` package is there (smaller,
    faster to unpack; fdl pulls it), else gzip."""
    if requested in LAYER_TYPES:
        return requested, f"--compression {requested}"
    if requested != "auto":
        raise UsageError(f"unknown compression {requested!r}", hint="use auto, zstd or gzip")
    try:
        compressor("zstd")
    except EnvironmentProblem:
        return "gzip", (
            "auto: gzip, since the zstandard package is not installed (`pip install "
            "'fdl[zstd]'` for smaller zstd layers that unpack faster)"
        )
    return "zstd", (
        "auto: zstd (Docker Engine before 23.0 cannot pull zstd layers: push with "
        "--compression gzip for COPY --from= on those)"
    )


@dataclass(frozen=True)
class PushResult:
    """A pushed variant."""

    variant: str
    reference: str  # repo@digest
    tag: str
    digest: str
    compression: str
    reason: str
    layers: tuple[LayerBlob, ...]
    uploaded: int
    annotations: dict[str, str] = field(default_factory=dict)
    # False: the registry already held this tree's push (recorded here): nothing packed.
    packed: bool = True
    # What whoever pulls it will meet (libraries torch loads that the variant lacks).
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "reference": self.reference,
            "tag": self.tag,
            "digest": self.digest,
            "compression": self.compression,
            "compression_reason": self.reason,
            "layers": [
                {"digest": layer.digest, "size": layer.size, "mediaType": layer.media_type}
                for layer in self.layers
            ],
            "uploaded": self.uploaded,
            "annotations": self.annotations,
            "packed": self.packed,
            "warnings": list(self.warnings),
        }

    @classmethod
    def recorded(cls, data: Mapping[str, Any]) -> PushResult:
        """A push as :meth:`to_json` wrote it, for a push that packs nothing."""
        layers = tuple(
            LayerBlob(Path(), str(layer["mediaType"]), str(layer["digest"]), "", int(layer["size"]))
            for layer in data.get("layers") or []
        )
        return cls(
            str(data["variant"]), str(data["reference"]), str(data["tag"]), str(data["digest"]),
            str(data["compression"]), str(data["compression_reason"]), layers, 0,
            dict(data.get("annotations") or {}), packed=False,
            warnings=tuple(data.get("warnings") or ()),
        )  # fmt: skip


def push_variant(
    context: Context,
    name: str,
    repository: str,
    *,
    credentials: Credentials,
    compression: str = "auto",
    tag: str | None = None,
    client_factory: ClientFactory | None = None,
    on_line: Callable[[str], None] | None = None,
) -> PushResult:
    """Push the installed variant ``name`` to ``repository`` (``host/namespace/name``).

    Raises:
        UsageError: the variant is not installed, or the repository is not one.
        RegistryError: the registry refused a blob or the manifest.
    """
    target = parse_reference(repository, repository_only=True)
    if tag is not None and not is_tag(tag):
        raise UsageError(
            f"--tag {printable(tag, 140)!r} is not a tag: a letter, digit or _, then letters, "
            "digits, . _ or -, at most 128 in all",
            hint="such as --tag 2.10.0-cu129-sm120, or leave --tag out (the default says what "
            "the variant is)",
        )
    chosen = variants.resolve_installed(context, name)
    tree = context.libtorch_dir / chosen
    say = on_line or (lambda _line: None)
    method, reason = choose_compression(compression)
    client = (client_factory or default_client(credentials))(target.host, target.repository)
    content = fingerprint(tree)
    asked = tag  # the record's key: the tag asked for (None: what the variant is)
    done = _already_pushed(
        client, recall_push(context, chosen, target.repo, tag, compression, content)
    )
    if done is not None:
        say(f"{target.repo}:{done.tag} already holds {chosen} as pushed from this tree "
            f"({done.digest}): nothing to pack or upload")  # fmt: skip
        return done
    info = variants.read_info(tree, chosen)
    warnings = _incomplete(tree, info, chosen)
    scan = scan_device_code(tree)
    found = scan.archs_found() if scan.has_device_code else {"cubin": [], "ptx": []}
    found = {"cubin": found.get("cubin", []), "ptx": found.get("ptx", [])}
    platform = platform_of(tree)
    identity = variant_tag(info, found)
    tag = tag or identity
    labels = image_annotations(info, found, platform=platform, tag=identity)
    with variant_lock(resolve_target(context, chosen), purpose=f"pushing libtorch {chosen}"):
        try:
            result = _push(client, tree, chosen, target, tag, labels, method, reason, platform, say)
        except RegistryError as exc:
            if compression != "auto" or method != "zstd" or exc.status not in (400, 415):
                raise
            say(f"the registry refused zstd layers ({exc.message}); pushing gzip")
            result = _push(
                client, tree, chosen, target, tag, labels, "gzip",
                "auto: the registry refused zstd layers", platform, say,
            )  # fmt: skip
    result = replace(result, warnings=warnings)
    remember_push(context, chosen, target.repo, asked, compression, content, result.to_json())
    return result


def _already_pushed(
    client: RegistryClient, recorded: Mapping[str, Any] | None
) -> PushResult | None:
    """The recorded push when the registry's tag still names its manifest (one GET)."""
    if recorded is None:
        return None
    try:
        served = client.manifest(str(recorded["tag"]), ACCEPT)
        done = PushResult.recorded(recorded)
    except (RegistryError, KeyError, TypeError, ValueError):
        return None  # gone, retagged or unreadable: push it
    return done if served.digest == done.digest else None


def _incomplete(tree: Path, info: variants.VariantInfo, name: str) -> tuple[str, ...]:
    """Whoever pulls the variant cannot run it: libraries torch loads that it lacks."""
    from fdl.checks import Severity
    from fdl.libtorch._deps import library_checks

    missing = [
        name
        for check in library_checks(tree, info)
        if check.severity is Severity.ERROR
        for name in (check.data or {}).get("missing", [])
    ]
    if not missing:
        return ()
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return (
        f"{name} lacks {len(missing)} libraries torch loads ({shown}): whoever pulls it "
        f"cannot run it; complete it first (fdl libtorch verify {name} says how), then push "
        "it again",
    )


def _push(
    client: RegistryClient,
    tree: Path,
    name: str,
    target: Reference,
    tag: str,
    labels: dict[str, str],
    method: str,
    reason: str,
    platform: str,
    say: Callable[[str], None],
) -> PushResult:
    uploaded = 0
    with tempfile.TemporaryDirectory(prefix="fdl-push-") as work:
        layers: list[LayerBlob] = []
        for number, names in enumerate(layer_groups(tree)):
            say(f"packing layer {number + 1} ({', '.join(names)}) with {method}")
            layer = write_layer(tree, names, Path(work) / f"layer-{number}", method)
            if not client.has_blob(layer.digest):
                say(f"uploading layer {number + 1} ({layer.size:,} bytes)")
                client.upload_blob(layer.path, layer.digest)
                uploaded += 1
            layer.path.unlink()
            layers.append(layer)
        config = json.dumps(
            image_config(labels, layers, platform), sort_keys=True, separators=(",", ":")
        ).encode()
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        if not client.has_blob(config_digest):
            config_path = Path(work) / "config.json"
            config_path.write_bytes(config)
            client.upload_blob(config_path, config_digest)
            uploaded += 1
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [
            {"mediaType": layer.media_type, "digest": layer.digest, "size": layer.size}
            for layer in layers
        ],
        "annotations": labels,
    }
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    digest = client.put_manifest(tag, body, OCI_MANIFEST)
    reference = f"{target.repo}@{digest}"
    say(f"pushed {target.repo}:{tag} as {reference}")
    return PushResult(name, reference, tag, digest, method, reason, tuple(layers), uploaded, labels)


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
        _unpack(blobs, self.config["rootfs"]["diff_ids"], staging, str(remote.reference), say)
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
        raise VariantMismatch(f"the config of {remote.pinned} is not an OCI image config")
    if len(diff_ids) != len(remote.manifest["layers"]):
        raise VariantMismatch(
            f"the config of {remote.pinned} lists {len(diff_ids)} layers, its manifest "
            f"{len(remote.manifest['layers'])}",
            hint="the image is damaged; push the variant again",
        )
    annotations = remote.manifest.get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    ours = {k: v for k, v in annotations.items() if str(k).startswith(ANNOTATION)}
    theirs = {k: v for k, v in labels.items() if str(k).startswith(ANNOTATION)}
    if ours != theirs:
        differ = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        raise VariantMismatch(
            f"{remote.pinned}: the manifest's annotations and the config's labels differ "
            f"({printable(', '.join(differ))})",
            hint="the image was altered after fdl pushed it; push the variant again",
        )
    return dict(config)


def _fetch_layers(
    client: RegistryClient,
    remote: RemoteVariant,
    cache: Path,
    on_bytes: Callable[[int], None] | None,
    counts: dict[str, int],
    say: Callable[[str], None],
) -> list[Path]:
    cache.mkdir(parents=True, exist_ok=True)
    layers = _layer_descriptors(remote)
    _check_room(cache, sum(size for _digest, size in layers), remote.pinned)
    blobs: list[Path] = []
    for number, (digest, size) in enumerate(layers):
        dest = cache / digest.replace(":", "-")
        if dest.is_file() and dest.stat().st_size == size and _sha256(dest) == digest:
            counts["resumed"] += size
        else:
            say(f"fetching layer {number + 1}/{len(layers)} ({size:,} bytes)")
            fetched = client.fetch_blob(digest, dest, size=size, on_bytes=on_bytes)
            counts["received"] += fetched.received
            counts["resumed"] += fetched.resumed
        blobs.append(dest)
    return blobs


def _layer_descriptors(remote: RemoteVariant) -> list[tuple[str, int]]:
    """(digest, size) of every layer, each checked before any is fetched: a gzip or zstd
    tar, a sha256 digest, a size within ``$FDL_REGISTRY_MAX_LAYER``."""
    most = MAX_LAYER.value()
    found: list[tuple[str, int]] = []
    for number, layer in enumerate(remote.manifest["layers"]):
        if not isinstance(layer, dict) or layer.get("mediaType") not in LAYER_TYPES.values():
            kind = layer.get("mediaType") if isinstance(layer, dict) else layer
            raise VariantMismatch(
                f"layer {number + 1} of {remote.pinned} is {printable(repr(kind), 100)}, "
                "not a gzip or zstd tar",
                hint="push the variant with fdl libtorch push",
            )
        digest, size = layer.get("digest"), layer.get("size")
        if not (isinstance(digest, str) and digest.startswith("sha256:") and is_digest(digest)):
            raise VariantMismatch(f"layer {number + 1} of {remote.pinned} has no sha256 digest")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise VariantMismatch(f"layer {number + 1} of {remote.pinned} has no valid size")
        if size > most:
            raise VariantMismatch(
                f"layer {number + 1} of {remote.pinned} is {size:,} bytes; fdl fetches "
                f"layers of at most {most:,}",
                hint=MAX_LAYER.hint(most),
            )
        found.append((digest, size))
    return found


def _check_room(cache: Path, needed: int, where: str) -> None:
    """Refuse to start a download the disk cannot hold (the layers, then their tars)."""
    free = shutil.disk_usage(cache).free
    if needed > free:
        raise EnvironmentProblem(
            f"{where}: its layers are {needed:,} bytes, and {cache} has {free:,} free",
            hint="free space there, or point FDL_CACHE_DIR at a larger disk",
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _unpack(
    blobs: list[Path], diff_ids: list[str], staging: Path, where: str, say: Callable[[str], None]
) -> None:
    """Each layer: decompressed to a tar (its sha256 checked against the diff_id),
    extracted safely, and merged into ``staging``."""
    staging.mkdir()
    for number, (blob, diff_id) in enumerate(zip(blobs, diff_ids, strict=True)):
        say(f"unpacking layer {number + 1}/{len(blobs)}")
        tar = blob.with_name(blob.name + ".tar")
        try:
            if _decompress(blob, tar, _unpacked_bound(blob.stat().st_size)) != diff_id:
                raise VariantMismatch(
                    f"layer {number + 1} of {where} does not unpack to the tar its config "
                    f"names ({diff_id})",
                    hint="the image was altered after fdl pushed it; push the variant again",
                )
            extracted = staging.parent / f"layer-{number}"
            safe_extract_tar(tar, extracted, strip_prefix=PREFIX)
        finally:
            tar.unlink(missing_ok=True)
        _merge(extracted, staging, where)
        shutil.rmtree(extracted, ignore_errors=True)


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
            raise VariantMismatch(f"{blob.name} is neither gzip nor zstd")
        digest = hashlib.sha256()
        written = 0
        try:
            with tar.open("wb") as out:
                while chunk := reader.read(1 << 20):
                    written += len(chunk)
                    if written > bound:
                        ratio = MAX_RATIO.value()
                        raise VariantMismatch(
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
            raise VariantMismatch(f"{blob.name} is not a valid compressed layer ({exc})") from None
        except Exception as exc:  # zstandard.ZstdError
            if type(exc).__name__ != "ZstdError":
                raise
            raise VariantMismatch(f"{blob.name} is not a valid zstd layer ({exc})") from None
    return f"sha256:{digest.hexdigest()}"


def _merge(source: Path, dest: Path, where: str) -> None:
    """Move ``source``'s entries into ``dest``; directories merge, files never overlap, and
    whiteouts (``.wh.*``: a layer deleting another's files) are refused."""
    for entry in sorted(source.iterdir()):
        if entry.name.startswith(".wh."):
            raise VariantMismatch(
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
            raise VariantMismatch(f"{where}: two layers hold {entry.name!r}")


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
                raise VariantMismatch(
                    f"{where}: once its layers are merged, the link {printable(relative, 120)} "
                    f"-> {printable(os.readlink(path), 120)} resolves outside the variant",
                    hint="refusing the variant (its layers build a link out of the tree "
                    "together); nothing was installed",
                )


def _check_tree(tree: Path, described: Described, where: str) -> None:
    """Refuse a tree with a link out of it, or whose binaries are not what the
    annotations claim."""
    _check_links(tree, where)
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
