"""The libtorch variants of the matrix: what each is, and how a CI runner gets it.

``cpu`` and ``cuXYZ`` are official builds (their CUDA, archs and cuDNN come from the
compatibility tables); ``build:<recipe>`` is a source build of a recipe, merged with the
manifest's ``libtorch.build`` exactly as ``fdl libtorch build --recipe`` merges them.
Nothing here needs the variant to be installed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from typing import Any

from fdl.ci._config import located as _error
from fdl.ci._matrix import CiConfig, MatrixVariant
from fdl.errors import FdlError, UsageError
from fdl.images import VariantRef, project_libtorch_image, variant_ref
from fdl.manifest import Manifest

__all__ = ["plan_variants", "torch_version"]

RECIPE_PREFIX = "build:"


def torch_version(manifest: Manifest) -> tuple[str, str]:
    """The PyTorch release of official variants and where it came from: ``ci.torch``, else
    ``libtorch.torch``, else the release the project's framework compiles against, else
    the newest. A ``ci.torch`` the framework cannot compile against is refused at its line
    (``libtorch.torch`` is checked by :func:`fdl.libtorch.framework_torch`)."""
    from fdl.compat import NewerRelease, resolve_torch_version
    from fdl.libtorch import CHECK_KEY, framework_torch

    decision = framework_torch(manifest)
    for key in ("ci.torch", "libtorch.torch"):
        wanted = manifest.get(key)
        if wanted is not None:
            try:
                full = resolve_torch_version(str(wanted))
            except NewerRelease as exc:
                # the command reads the release at run time (fdl.cli._learn) and plans again
                exc.location = manifest.error(key, exc.message).location
                raise
            except UsageError as exc:
                raise _error(manifest, key, exc.message, exc.hint) from None
            reason = decision.refusal(full)
            if reason:
                instead = f'"{decision.torch}"' if decision.torch else "the framework's release"
                raise _error(
                    manifest,
                    key,
                    f"{wanted} cannot be used: {reason}",
                    f"set {key}: {instead} (or remove it); to keep it on purpose, set "
                    f"{CHECK_KEY}: false",
                )
            return full, key
    if decision.torch is not None:
        return decision.torch, decision.origin
    return resolve_torch_version(None), "the newest release fdl knows"


def plan_variants(manifest: Manifest, config: CiConfig) -> tuple[MatrixVariant, ...]:
    """Every variant of ``ci.variants``, in the order written.

    Raises:
        ManifestError: a variant the release does not have, an unknown or invalid
            recipe, or two variants with the same short name (located at ``ci.variants``).
    """
    keys = [str(key) for key in manifest.get("ci.variants") or ()]
    if not keys:
        raise _error(manifest, "ci.variants", "the matrix has no variants", "e.g. [cpu, cu130]")
    planned: list[MatrixVariant] = []
    seen: dict[str, str] = {}
    for index, key in enumerate(keys):
        where = f"ci.variants.{index}"
        if key.startswith(RECIPE_PREFIX):
            variant = _recipe_variant(manifest, config, key, where)
        else:
            variant = _official_variant(manifest, config, key, where)
        if variant.slug in seen:
            raise _error(
                manifest,
                where,
                f"{key} and {seen[variant.slug]} would share the name {variant.slug!r} "
                "in tags and targets",
                hint="list each variant once; rename a project recipe that shadows an "
                "official variant",
            )
        seen[variant.slug] = key
        planned.append(variant)
    return tuple(_pushed(manifest, config, planned, keys))


def _pushed(
    manifest: Manifest, config: CiConfig, planned: list[MatrixVariant], keys: list[str]
) -> list[MatrixVariant]:
    """The variants with ``ci.pushed`` references: installed by ``fdl libtorch pull`` and
    copied into their libtorch image from the registry by digest (nothing built or
    downloaded in CI). The reference's shape was checked when the manifest loaded; the
    registry is not read here (plans are pure, and ``fdl ci check`` needs no registry)."""
    pushed = {str(key): str(ref) for key, ref in (manifest.get("ci.pushed") or {}).items()}
    for key in pushed:
        if key not in keys:
            raise _error(
                manifest,
                f"ci.pushed.{key}",
                f"{key} is not a variant of the matrix",
                hint=f"ci.variants: {', '.join(keys)}; add {key} there or remove this entry",
            )
    return [
        replace(
            variant,
            pushed=pushed[variant.key],
            install=(
                "fdl",
                "libtorch",
                "pull",
                pushed[variant.key],
                "--name",
                variant.name,
                "--no-activate",
            ),
            cache_key=None,
            # No files from the runner: the Dockerfile copies from the pushed image, so
            # the context is the (small, checked-in) directory of the generated Dockerfiles.
            context=f"{config.output}/dockerfiles",
        )
        if variant.key in pushed
        else variant
        for variant in planned
    ]


def _official_variant(manifest: Manifest, config: CiConfig, key: str, where: str) -> MatrixVariant:
    from fdl.compat import release

    torch, torch_key = torch_version(manifest)
    try:
        official = release(torch).variant(key)
    except UsageError as exc:
        raise _error(
            manifest, where, f"{exc.message} (PyTorch {torch} from {torch_key})", exc.hint
        ) from None
    shared = variant_ref(f"precompiled/{key}", None, pinned=True)
    ref = replace(
        shared,
        image=project_libtorch_image(shared.name, config.project),
        torch=torch,
        cuda=official.cuda,
        cudnn=official.cuda is not None and official.cudnn is not None,
        archs=tuple(official.targets_for(torch).codes()) if official.cuda else (),
    )
    flag = ["--cpu"] if official.cuda is None else ["--cuda", official.cuda]
    install = ("fdl", "libtorch", "download", *flag, "--torch", torch, "--no-activate")
    return _variant(config, key, key, ref, install, recipe=None, cache_key=None)


def _recipe_variant(manifest: Manifest, config: CiConfig, key: str, where: str) -> MatrixVariant:
    from fdl.libtorch.build import build_request
    from fdl.manifest import LayerKind, Origin

    recipe = key.removeprefix(RECIPE_PREFIX)
    location = _error(manifest, where, "").location
    origin = (
        Origin(location.file, location.line, location.column, LayerKind.BASE, location.path)
        if location is not None and location.line
        else where
    )
    options = {"recipe": (recipe, origin), "name": (recipe, origin)}
    try:
        request = build_request(manifest, options, manifest.directory)
        from fdl.libtorch import framework_torch

        framework = framework_torch(manifest).origin or None
        if (
            request.torch is None
            or request.torch.origin.endswith("(libtorch.torch)")
            or request.torch.origin == framework
        ):
            # Not pinned by the recipe or libtorch.build: the matrix's release (ci.torch,
            # else libtorch.torch), as for the official variants.
            from fdl.libtorch.build import Setting

            torch, torch_key = torch_version(manifest)
            request = replace(request, torch=Setting(torch, torch_key))
        torch, cuda, archs, cudnn = _recipe_facts(request)
    except FdlError as exc:
        if exc.location is not None:
            raise
        raise _error(manifest, where, exc.message, exc.hint) from None
    shared = variant_ref(f"builds/{recipe}", None, pinned=True)
    ref = replace(
        shared,
        image=project_libtorch_image(shared.name, config.project),
        torch=torch,
        cuda=cuda,
        cudnn=cudnn,
        archs=archs,
    )
    install = (
        "fdl",
        "libtorch",
        "build",
        "--recipe",
        recipe,
        "--docker",
        "--name",
        recipe,
        "--no-activate",
    )
    digest = hashlib.sha256(
        json.dumps(
            {"request": _request_values(request), "fdl": _fdl_version()}, sort_keys=True
        ).encode()
    ).hexdigest()[:16]
    cache_key = f"fdl-libtorch-{recipe}-{digest}"
    slug = re.sub(r"[^A-Za-z0-9_-]", "-", recipe)  # job, group and target names
    variant = _variant(config, key, slug, ref, install, recipe=recipe, cache_key=cache_key)
    return replace(variant, hosted_estimate=_hosted_estimate(request, torch, archs))


def _hosted_estimate(request: Any, torch: str, archs: tuple[str, ...]) -> tuple[int, str] | None:
    """The build's estimate on a GitHub-hosted runner (None: no counts for the release)."""
    from fdl.ci._data import ci_data
    from fdl.compat import CompatDataError
    from fdl.libtorch.build import BuildEstimate, estimate_build

    machine = ci_data().hosted_machine
    cores, ram = int(machine["cores"]), machine["ram_gb"]
    switches = {name: str(setting.value) for name, setting in request.switches.items()}
    flash = bool(archs) and bool(request.value("flash_attention", True))

    def on_hosted(jobs: int) -> BuildEstimate:
        return estimate_build(
            torch=torch,
            archs=",".join(archs),
            jobs=jobs,
            cores=cores,
            ram_gb=ram,
            flash_attention=flash,
            switches=switches,
        )

    try:
        first = on_hosted(cores)
        # as many jobs as the hosted machine's memory holds
        jobs = min(cores, first.fits_jobs)
        estimate = first if jobs == cores else on_hosted(jobs)
    except CompatDataError:
        return None
    return round(estimate.seconds / 60), estimate.duration()


def _recipe_facts(request: Any) -> tuple[str, str | None, tuple[str, ...], bool]:
    """(torch, CUDA, arch codes, cuDNN) of a source build, as the build planner decides
    them when nothing else is said (:func:`fdl.compat.preferred_toolkit`)."""
    from fdl.compat import Kind, Target, parse_archs, preferred_toolkit, resolve_torch_version
    from fdl.compat.archs import ArchList

    torch = resolve_torch_version(request.value("torch"))
    if request.value("cpu", False):
        return torch, None, (), False
    if request.archs is None:
        raise UsageError(
            "the recipe names no archs, and CI has no GPU to detect them from",
            hint="set `archs:` in the recipe or in libtorch.build",
        )
    archs = parse_archs(str(request.archs.value))
    if request.value("ptx", False) and archs.cubins:
        newest = max(archs.cubins, key=lambda t: (t.capability, t.suffix))
        archs = archs | ArchList.of([Target(newest.capability, Kind.PTX, newest.suffix)])
    # The toolkit the build's plan picks (no driver: CI builds for the declared GPUs).
    cuda = request.value("cuda") or preferred_toolkit(torch, archs).version
    switch = request.switches.get("USE_CUDNN")
    cudnn = switch is None or str(switch.value).upper() not in ("0", "OFF", "FALSE", "NO")
    return torch, str(cuda), tuple(archs.codes()), cudnn


def _request_values(request: Any) -> dict[str, str]:
    """The request's values without their origins and without cache settings (they
    change where the compiler cache lives, not what is built)."""
    return {
        name: entry["value"]
        for name, entry in request.provenance().items()
        if not name.startswith("cache_settings.")
    }


def _fdl_version() -> str:
    from fdl import __version__

    return __version__


def _variant(
    config: CiConfig,
    key: str,
    slug: str,
    ref: VariantRef,
    install: tuple[str, ...],
    *,
    recipe: str | None,
    cache_key: str | None,
) -> MatrixVariant:
    return MatrixVariant(
        key=key,
        slug=slug,
        name=ref.name,
        ref=ref,
        recipe=recipe,
        install=install,
        cache_key=cache_key,
        target=f"libtorch-{slug}",
        context=f"libtorch/{ref.name}",
        dockerfile=f"{config.output}/dockerfiles/libtorch-{slug}.Dockerfile",
    )
