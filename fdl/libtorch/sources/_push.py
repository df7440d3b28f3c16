"""``fdl libtorch push``: an installed variant as an OCI image in a team's registry.

:func:`push_variant` reads an installed variant (its archs from its binaries, not from its
metadata), writes it as an OCI image (:mod:`fdl.formats.oci`'s layers, config and
manifest, with :mod:`fdl.libtorch.sources._oci`'s annotations) and stores it under a tag
saying what it is; the registry's digest is the reference to share. A tree pushed before
(recorded by :mod:`fdl.libtorch.sources._pushed`) is not packed again.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fdl._text import printable
from fdl.errors import EnvironmentProblem, UsageError
from fdl.formats.oci import (
    ACCEPT,
    LAYER_TYPES,
    OCI_MANIFEST,
    LayerBlob,
    Reference,
    compressor,
    image_config,
    image_manifest,
    parse_reference,
    write_layer,
)
from fdl.libtorch import variants
from fdl.libtorch._install import resolve_target, variant_lock
from fdl.libtorch._scan import scan_device_code
from fdl.libtorch.sources._oci import (
    PREFIX,
    image_annotations,
    layer_groups,
    platform_of,
    variant_tag,
)
from fdl.libtorch.sources._pushed import fingerprint, recall_push, remember_push
from fdl.libtorch.sources._registry import ClientFactory, Credentials, default_client
from fdl.net import RegistryClient, RegistryError, is_tag
from fdl.paths import Context

__all__ = ["PushResult", "choose_compression", "push_variant"]


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
            layer = write_layer(tree, names, Path(work) / f"layer-{number}", method, prefix=PREFIX)
            if not client.has_blob(layer.digest):
                say(f"uploading layer {number + 1} ({layer.size:,} bytes)")
                client.upload_blob(layer.path, layer.digest)
                uploaded += 1
            layer.path.unlink()
            layers.append(layer)
        config = json.dumps(
            image_config(labels, layers, platform), sort_keys=True, separators=(",", ":")
        ).encode()
        manifest = image_manifest(config, layers, labels)
        config_digest = manifest["config"]["digest"]
        if not client.has_blob(config_digest):
            config_path = Path(work) / "config.json"
            config_path.write_bytes(config)
            client.upload_blob(config_path, config_digest)
            uploaded += 1
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    digest = client.put_manifest(tag, body, OCI_MANIFEST)
    reference = f"{target.repo}@{digest}"
    say(f"pushed {target.repo}:{tag} as {reference}")
    return PushResult(name, reference, tag, digest, method, reason, tuple(layers), uploaded, labels)
