"""From the manifest to a deploy plan, and the push that resolves the digest."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from fdl.compat.rocm import gfx_processor
from fdl.deploy._layers import PushResult, ZstdUnavailable, choose_compression, push_zstd
from fdl.deploy._load import load_target
from fdl.deploy._placement import ImageArchs
from fdl.deploy._plan import DeployPlan, plan_deploy
from fdl.deploy._target import DeployTarget
from fdl.engine import Engine, LineCallback
from fdl.errors import EnvironmentProblem, UsageError
from fdl.images import ImageSpec, VariantRef, build_images, plan_images, project_name
from fdl.libtorch import variants
from fdl.manifest import Manifest
from fdl.net import RegistryError

__all__ = [
    "Prepared",
    "archs_of_image",
    "build_for_deploy",
    "image_archs",
    "prepare",
    "push_by_digest",
    "push_image",
    "state_dir",
]


@dataclass(frozen=True)
class Prepared:
    """A target and the image it deploys."""

    target: DeployTarget
    spec: ImageSpec
    archs: ImageArchs
    project: str
    directory: Path | None = None

    def plan(self, digest: str | None = None, archs: ImageArchs | None = None) -> DeployPlan:
        """The plan; ``archs`` read from the built image replace the manifest's."""
        name = self.spec.program_name or "program"
        return plan_deploy(
            self.target,
            project=self.project,
            local_image=self.spec.tag,
            archs=archs or self.archs,
            entrypoint=[f"{self.spec.path('app')}/bin/{name}"],
            args=list(self.spec.args),
            digest=digest,
            mounts=self.mounts(),
        )

    def mounts(self) -> tuple[str, ...]:
        """The image profile's mounts as ``fdl image run`` makes them, sources absolute."""
        if self.directory is None:
            return ()
        return tuple(
            f"{(self.directory / m.source).resolve()}:{m.target}" + (":ro" if m.read_only else "")
            for m in self.spec.mounts
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
        return ImageArchs(variant.name, variant.cuda, variant.archs, variant.torch)
    info = variants.read_info(variant.directory, variant.name)
    found = [*info.archs_found.get("cubin", []), *info.archs_found.get("ptx", [])]
    return ImageArchs(
        variant.name, info.cuda, tuple(found or info.archs_requested), info.torch or variant.torch
    )


def archs_of_image(labels: Mapping[str, str], image: str, manifest: ImageArchs) -> ImageArchs:
    """What the built image's libtorch is, from the labels fdl gave it (``dev.fdl.variant``,
    ``dev.fdl.cuda``, ``dev.fdl.archs``): placement judges the image that ships, not the
    manifest. The manifest's reading (with the PTX its variant.json lists) is kept only
    when it names the same build.

    Raises:
        EnvironmentProblem: the image carries no such labels (fdl did not build it).
    """
    variant = labels.get("dev.fdl.variant")
    cuda = labels.get("dev.fdl.cuda")
    if variant is None or cuda is None:
        raise EnvironmentProblem(
            f"the image {image} does not say which libtorch it holds (no dev.fdl.variant "
            "label): fdl did not build it",
            hint="build it with fdl: fdl image build train",
        )
    # nvcc's codes only: a CPU build says `cpu`, a ROCm one its gfx targets or `rocm`
    codes = tuple(
        sorted(
            c
            for c in set(labels.get("dev.fdl.archs", "").split()) - {"cpu", "rocm"}
            if not gfx_processor(c)
        )
    )
    found = ImageArchs(
        variant, None if cuda == "none" else cuda, codes, labels.get("dev.fdl.torch")
    )
    same_cubins = {c for c in manifest.codes if c.startswith("sm_")} == set(codes)
    if (manifest.variant, manifest.cuda) == (found.variant, found.cuda) and same_cubins:
        return manifest
    return found


def build_for_deploy(
    prepared: Prepared,
    engine: Engine,
    *,
    environ: Mapping[str, str] | None = None,
    on_status: Callable[[str], None] | None = None,
    on_line: LineCallback | None = None,
) -> ImageArchs:
    """Build the target's image from the project as it is now (BuildKit's cache makes an
    unchanged project a quick no-op), and return what its libtorch is, from its labels.

    What ``submit`` ships is then what the source says: an edit made since the last
    ``fdl image build`` is in it.
    """
    if prepared.directory is None:
        raise UsageError("the project's directory is unknown", hint="run fdl in the project")
    build_images(
        [prepared.spec],
        prepared.directory,
        engine=engine,
        environ=environ,
        on_status=on_status,
        on_line=on_line,
    )
    labels = engine.inspect_image(prepared.spec.tag).labels
    return archs_of_image(labels, prepared.spec.tag, prepared.archs)


def prepare(
    manifest: Manifest, name: str | None, *, visible: tuple[int, ...] | None = None
) -> Prepared:
    """Load the target and plan its image profile (no program runs); ``visible``: floDl's
    global ``--gpus`` (the devices of the job's GPUs its programs see; None: all)."""
    target = load_target(manifest, name)
    if visible is not None:
        target = replace(target, visible=tuple(sorted(set(visible))))
    specs = plan_images(manifest, [target.profile])
    spec = specs[0]
    if spec.kind != "train":
        raise UsageError(
            f"deploy target {target.name!r} deploys profile {target.profile!r}, a {spec.kind} image",
            hint="deploy a train profile (`profile:` in the target)",
        )
    return Prepared(
        target, spec, image_archs(spec.variant), project_name(manifest), manifest.directory
    )


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
