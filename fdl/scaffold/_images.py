"""The generated project's images, planned from its generated manifest by fdl.images
(the Dockerfiles and the compose file have one source: the image templates)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from fdl.images import ImageSpec, VariantRef, VariantResolver
from fdl.manifest import Manifest
from fdl.scaffold._project_files import Answers

__all__ = ["plan_generated", "scaffold_resolver"]


def scaffold_resolver(answers: Answers, cuda: dict[str, tuple[str, bool]]) -> VariantResolver:
    """Resolve variant names without an installed variant: the project has none yet.

    Args:
        answers: The project's answers (its torch version).
        cuda: CUDA variant short names (``cu130``) -> (CUDA version, uses cuDNN).
    """
    from fdl.images import variant_ref

    def resolve(name: str | None) -> VariantRef:
        chosen = name or "precompiled/cpu"
        version, cudnn = cuda.get(chosen.rsplit("/", 1)[-1], (None, False))
        ref = variant_ref(chosen, None, pinned=name is not None)
        return replace(ref, torch=answers.torch, cuda=version, cudnn=bool(version and cudnn))

    return resolve


def _cuda_variants(answers: Answers) -> dict[str, tuple[str, bool]]:
    """The official CUDA builds of the torch, and the project's CUDA variant (a source
    build for its GPUs has no official entry: its CUDA is what the build plan picks)."""
    from fdl.compat.pytorch import release

    known = {
        variant.name: (str(variant.cuda), variant.cudnn is not None)
        for variant in release(answers.torch).variants
        if variant.cuda is not None
    }
    from fdl.scaffold._templates import template

    if template(answers.template).framework is not None:
        from fdl.scaffold._values import cuda_service

        target = cuda_service(answers)
        known[target.variant.rsplit("/", 1)[-1]] = (target.cuda, target.cudnn)
    return known


def plan_generated(
    answers: Answers,
    manifest: str,
    overlays: dict[str, str],
    fdl_version: str,
    sources: dict[str, str] | None = None,
    *,
    own: bool = False,
) -> tuple[dict[str, Any], list[ImageSpec], list[tuple[str, str]]]:
    """Validate the generated manifest and overlays, and plan their image profiles.

    They are loaded from a scratch directory named after the project (images take
    the project's name from the directory); nothing of its path reaches the output.

    Args:
        answers: The answers.
        manifest: The base manifest's text.
        overlays: Environment name -> the text of its overlay ``fdl.<env>.yml``.
        fdl_version: Recorded in the images' labels.
        sources: Other project files image planning reads (``CMakeLists.txt``, for the
            default program of a training image).
        own: The manifest is the user's (not the template's).

    Returns:
        The base manifest's data, the planned images, and the files of
        ``fdl ci generate`` (path, text).

    Raises:
        ManifestError: a generated file fails validation (a bug in a template).
    """
    from fdl.images import plan_images
    from fdl.manifest import load_manifest

    with tempfile.TemporaryDirectory(prefix="fdl-init-") as scratch:
        directory = Path(scratch) / answers.name
        directory.mkdir()
        (directory / answers.manifest_file).write_text(manifest, encoding="utf-8")
        for env, text in overlays.items():
            (directory / f"fdl.{env}.yml").write_text(text, encoding="utf-8")
        for name, text in (sources or {}).items():
            (directory / name).write_text(text, encoding="utf-8")
        for env in sorted(overlays):
            load_manifest(directory, env=env, environ={})
        loaded = load_manifest(directory, environ={})
        resolver = scaffold_resolver(answers, _cuda_variants(answers))
        specs = plan_images(loaded, resolver=resolver, fdl_version=fdl_version)
        return loaded.data, specs, _ci_files(loaded, directory, fdl_version, own)


def _ci_files(
    loaded: Manifest, directory: Path, fdl_version: str, own: bool
) -> list[tuple[str, str]]:
    """What ``fdl ci generate`` writes for the manifest's ``ci:`` section (path, text),
    the project being its repository's root: `fdl init` writes them, so ``fdl ci check``
    agrees from the first commit. A ``ci:`` section of the user's that cannot be planned
    here (a recipe of the project's, not in the scratch directory) gives none: those
    files are then left to ``fdl ci generate``, which reads the whole project."""
    from fdl.ci import generated_files, plan_matrix
    from fdl.errors import FdlError

    if not loaded.get("ci"):
        return []
    try:
        matrix = plan_matrix(loaded, fdl_version=fdl_version, repo_root=directory)
    except FdlError:
        if own:
            return []
        raise
    return [(item.path, item.text) for item in generated_files(matrix)]
