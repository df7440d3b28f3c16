"""From the manifest to a deploy plan, and the push that resolves the digest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fdl.deploy._layers import PushResult, ZstdUnavailable, choose_compression, push_zstd
from fdl.deploy._placement import ImageArchs
from fdl.deploy._plan import DeployPlan, plan_deploy
from fdl.deploy._target import DeployTarget, load_target
from fdl.engine import Engine, LineCallback
from fdl.errors import EnvironmentProblem, UsageError
from fdl.images import ImageSpec, VariantRef, plan_images, project_name
from fdl.libtorch import variants
from fdl.manifest import Manifest
from fdl.net import RegistryError

__all__ = ["Prepared", "image_archs", "prepare", "push_by_digest", "push_image", "state_dir"]


@dataclass(frozen=True)
class Prepared:
    """A target and the image it deploys."""

    target: DeployTarget
    spec: ImageSpec
    archs: ImageArchs
    project: str

    def plan(self, digest: str | None = None) -> DeployPlan:
        name = self.spec.program_name or "program"
        return plan_deploy(
            self.target,
            project=self.project,
            local_image=self.spec.tag,
            archs=self.archs,
            entrypoint=[f"{self.spec.path('app')}/bin/{name}"],
            args=list(self.spec.args),
            digest=digest,
        )


def state_dir(manifest: Manifest) -> Path:
    """Where ``submit`` keeps scripts, objects and job records: ``<project>/.fdl/deploy``."""
    return manifest.directory / ".fdl" / "deploy"


def image_archs(variant: VariantRef | None) -> ImageArchs:
    """What the image's libtorch contains, from its ``variant.json`` (archs read from
    the fatbins at install; the requested ones when nothing was read)."""
    if variant is None:
        return ImageArchs("none", None, ())
    if variant.directory is None:
        return ImageArchs(variant.name, variant.cuda, variant.archs)
    info = variants.read_info(variant.directory, variant.name)
    found = [*info.archs_found.get("cubin", []), *info.archs_found.get("ptx", [])]
    return ImageArchs(variant.name, info.cuda, tuple(found or info.archs_requested))


def prepare(manifest: Manifest, name: str | None) -> Prepared:
    """Load the target and plan its image profile (no program runs)."""
    target = load_target(manifest, name)
    specs = plan_images(manifest, [target.profile])
    spec = specs[0]
    if spec.kind != "train":
        raise UsageError(
            f"deploy target {target.name!r} deploys profile {target.profile!r}, a {spec.kind} image",
            hint="deploy a train profile (`profile:` in the target)",
        )
    return Prepared(target, spec, image_archs(spec.variant), project_name(manifest))


def push_by_digest(
    engine: Engine, local: str, remote: str, *, on_line: LineCallback | None = None
) -> str:
    """Tag ``local`` as ``remote``, push it, and return its ``sha256:`` digest.

    Raises:
        EnvironmentProblem: the image was not built, or the push gave no digest.
    """
    if not engine.image_exists(local):
        raise EnvironmentProblem(
            f"the image {local} is not built", hint="build it first: fdl image build train"
        )
    engine.tag(local, remote)
    engine.push(remote, on_line=on_line)
    repository = remote.rsplit(":", 1)[0]
    for reference in engine.inspect_image(remote).repo_digests:
        name, _, digest = reference.partition("@")
        if name == repository and digest:
            return digest
    raise EnvironmentProblem(
        f"pushing {remote} left no digest for {repository}",
        hint="check that the registry accepted the push (`docker push` again)",
    )


def push_image(
    engine: Engine,
    target: DeployTarget,
    local: str,
    remote: str,
    *,
    on_line: LineCallback | None = None,
) -> PushResult:
    """Push ``local`` as ``remote`` with the target's layer compression
    (:func:`~fdl.deploy.choose_compression`); its digest in the result.

    Under ``compression: auto`` a registry that refuses the zstd push (or a missing
    ``zstandard`` package) gets the gzip push instead, with a line saying why.
    """
    choice = choose_compression(target)
    if choice.method == "zstd":
        try:
            return push_zstd(engine, local, remote, on_line=on_line)
        except (RegistryError, ZstdUnavailable) as exc:
            # A registry that refuses the OCI manifest or a zstd blob gets gzip; refused
            # credentials and unreachable registries would fail the gzip push too.
            refused_creds = isinstance(exc, RegistryError) and exc.status in (401, 403)
            if not choice.falls_back or refused_creds:
                raise
            if on_line is not None:
                on_line(f"zstd push failed ({exc.message}); pushing with gzip instead")
    return PushResult(push_by_digest(engine, local, remote, on_line=on_line), "gzip")
