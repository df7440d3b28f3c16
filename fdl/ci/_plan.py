"""From the manifest's ``ci:`` and ``images:`` sections to the :class:`Matrix`.

Pure apart from reading recipes and the project's ``CMakeLists.txt`` (through the images
planner): no docker, no network, no installed variant needed. Every cell is planned
with :func:`fdl.images.plan_images` against the variant CI will install, so a cell's
Dockerfile is exactly what ``fdl image render`` would write for that variant.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from fdl.ci._config import fill_tag, located, read_config
from fdl.ci._data import ci_data
from fdl.ci._matrix import Cell, CiConfig, Matrix, MatrixVariant
from fdl.ci._variants import plan_variants
from fdl.errors import ManifestError
from fdl.images import ImageSpec, plan_images, project_name
from fdl.manifest import Manifest

__all__ = ["plan_matrix"]


def plan_matrix(
    manifest: Manifest,
    *,
    fdl_version: str | None = None,
    repo_root: Path | None = None,
    env: str | None = None,
) -> Matrix:
    """Resolve the matrix: profiles x variants, each cell with its tag, build arguments,
    dependencies and cache scope.

    Args:
        manifest: The loaded manifest (overlays applied).
        fdl_version: Recorded in the generated files (default: this fdl's version).
        repo_root: The repository root (default: the nearest directory with ``.git``).
        env: The overlay the manifest was loaded with (named in the files' header).

    Raises:
        ManifestError: no ``ci:`` section, an unknown profile or variant, a tag scheme
            that gives two cells one tag (located at the value to change).
    """
    from fdl import __version__

    version = fdl_version or __version__
    config = read_config(manifest, project=project_name(manifest), repo_root=repo_root, env=env)
    variants = plan_variants(manifest, config)
    profiles = _profiles(manifest)
    for name in manifest.get("ci.tests") or {}:
        if name not in profiles:
            raise located(
                manifest,
                f"ci.tests.{name}",
                f"{name!r} is not a profile of the matrix",
                hint=f"the matrix builds {', '.join(profiles)}",
            )
    cells: list[Cell] = []
    for variant in variants:
        for profile in profiles:
            spec = plan_images(
                manifest,
                [profile],
                resolver=lambda _name, ref=variant.ref: ref,  # type: ignore[misc]
                fdl_version=version,
            )[0]
            if spec.host_rust:
                raise located(
                    manifest,
                    f"images.{profile}.toolchain",
                    "`host` mounts the Rust of the machine that builds, which a CI runner "
                    "building this matrix does not have",
                    hint=f"keep `toolchain: setup` in the manifest and ask for the host's Rust "
                    f"on this machine only: fdl --set images.{profile}.toolchain=host image "
                    f"build {profile}",
                )
            cells.append(_cell(manifest, config, variant, spec))
    _check_unique(manifest, variants, cells)
    return Matrix(config, variants, tuple(cells), version)


def _profiles(manifest: Manifest) -> list[str]:
    """``ci.profiles``, or every dev and train profile of ``images:``."""
    from fdl.images import profiles_of

    declared = profiles_of(manifest)
    kinds = {name: str(raw.get("kind") or name) for name, raw in declared.items()}
    wanted = manifest.get("ci.profiles")
    if wanted is None:
        chosen = [name for name, kind in kinds.items() if kind in ("dev", "train")]
        if not chosen:
            raise ManifestError(
                "ci: the images section has no dev or train profile to build",
                hint="declare one under images:, e.g. train: {}",
            )
        return chosen
    for index, name in enumerate(wanted):
        key = f"ci.profiles.{index}"
        if name not in kinds:
            from fdl._text import did_you_mean

            close = did_you_mean(name, list(kinds))
            hint = f"did you mean {close!r}?" if close else f"profiles: {', '.join(kinds)}"
            raise located(manifest, key, f"no image profile {name!r} under images:", hint)
        if kinds[name] not in ("dev", "train"):
            raise located(
                manifest,
                key,
                f"{name!r} is a {kinds[name]} image, which is not built per libtorch variant",
                hint="list dev and train profiles only",
            )
    return list(dict.fromkeys(str(name) for name in wanted))


def _cell(manifest: Manifest, config: CiConfig, variant: MatrixVariant, spec: ImageSpec) -> Cell:
    ident = f"{re.sub(r'[^A-Za-z0-9_-]', '-', spec.profile)}-{variant.slug}"
    tag = fill_tag(
        config.tag,
        {
            "registry": config.registry or "",
            "project": config.project,
            "profile": spec.profile,
            "variant": variant.slug,
            "torch": variant.torch,
            "version": config.version,
        },
    )
    spec = _named(spec, config.project, tag)
    args = {"BASE_IMAGE": spec.base}
    if spec.build_base is not None:
        args["BUILD_BASE_IMAGE"] = spec.build_base
    needs: tuple[str, ...] = ()
    if spec.needs_libtorch_image and spec.variant is not None:
        args["LIBTORCH_IMAGE"] = spec.variant.image
        needs = (variant.target,)
    cache_from, cache_to = _caches(config, ident)
    return Cell(
        id=ident,
        profile=spec.profile,
        variant=variant,
        spec=spec,
        tag=tag,
        args=tuple(sorted(args.items())),
        context=spec.context,
        dockerfile=f"{config.output}/dockerfiles/{ident}.Dockerfile",
        needs=needs,
        cache_from=cache_from,
        cache_to=cache_to,
        secrets=tuple(
            f"id={secret.id},env={secret.env}"
            if secret.env
            else f"id={secret.id},src={secret.file}"
            for secret in spec.secrets
        ),
        test=_test(manifest, spec),
    )


def _named(spec: ImageSpec, project: str, tag: str) -> ImageSpec:
    """The spec under the matrix's project name: the images planner names a project
    after its directory, which differs between checkouts (the generated files must not)."""
    defaults = {
        "org.opencontainers.image.title": (
            f"{spec.project}-{spec.profile}",
            f"{project}-{spec.profile}",
        ),
        "org.opencontainers.image.description": (
            f"{spec.project} {spec.kind} image",
            f"{project} {spec.kind} image",
        ),
    }
    labels = tuple(
        (name, defaults[name][1] if name in defaults and value == defaults[name][0] else value)
        for name, value in spec.labels
    )
    variant = spec.variant
    if variant is not None:  # the project's own stable name of its variant image, renamed too
        variant = replace(
            variant, image=variant.image.replace(f":{spec.project}-", f":{project}-", 1)
        )
    return replace(spec, project=project, tag=tag, labels=labels, variant=variant)


def _caches(config: CiConfig, ident: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each cell reads and writes its own scope: cells never overwrite each other's cache."""
    sources: list[str] = []
    exports: list[str] = []
    if config.cache_registry and config.registry:
        ref = f"{config.registry}/{config.project}-cache:{ident}"
        sources.append(f"type=registry,ref={ref}")
        exports.append(f"type=registry,ref={ref},mode={config.cache_mode}")
    if config.cache_gha:
        sources.append(f"type=gha,scope={ident}")
        exports.append(f"type=gha,scope={ident},mode={config.cache_mode}")
    return tuple(sources), tuple(exports)


def _test(manifest: Manifest, spec: ImageSpec) -> tuple[str, ...] | None:
    """The arguments of the image's test run (None: not tested)."""
    declared = (manifest.get("ci.tests") or {}).get(spec.profile)
    if declared is False:
        return None
    if declared is None or declared is True:
        return ci_data().default_test(spec.kind)
    return tuple(str(arg) for arg in declared)


def _check_unique(
    manifest: Manifest, variants: tuple[MatrixVariant, ...], cells: list[Cell]
) -> None:
    tags: dict[str, str] = {}
    targets = {variant.target for variant in variants}
    for cell in cells:
        if cell.id in targets:
            raise located(
                manifest,
                f"images.{cell.profile}",
                f"profile {cell.profile!r} makes the cell name {cell.id!r}, which is taken",
                hint="rename the profile (names differing only in . and - collide; "
                "libtorch-* names are the variants' images)",
            )
        targets.add(cell.id)
        if cell.tag in tags:
            raise located(
                manifest,
                "ci.tag" if manifest.origin("ci.tag") else "ci",
                f"cells {tags[cell.tag]} and {cell.id} get the same tag {cell.tag}",
                hint="use {profile} and {variant} in the tag scheme",
            )
        tags[cell.tag] = cell.id
