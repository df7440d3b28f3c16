"""The CI image matrix as values: variants, cells, and the matrix that holds them.

Planned by :mod:`fdl.ci._plan`, rendered by :mod:`fdl.ci._render`, built locally by
:mod:`fdl.ci._local`. Paths are POSIX strings relative to the project directory (where
the bake file runs) unless a field says otherwise; collections are tuples in a fixed
order, so that everything rendered from a matrix is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fdl.ci._fdl import FdlInstall
from fdl.images import ImageSpec, VariantRef

__all__ = ["Cell", "CiConfig", "Matrix", "MatrixVariant", "bake_path"]


@dataclass(frozen=True)
class CiConfig:
    """The ``ci:`` section with its defaults applied.

    Attributes:
        registry: Where images and caches go (None: local only, nothing pushed).
        project: The ``{project}`` of tags and cache names.
        tag: The tag scheme.
        version: The ``{version}`` of tags.
        platforms: Image platforms.
        cache_registry, cache_gha: Which per-cell caches to use.
        cache_mode: ``max`` (every stage) or ``min`` (the final image's layers).
        runner, build_runner: ``runs-on`` of image jobs and of source builds.
        branch: Images and caches are pushed by builds of this branch.
        fdl: How the workflow installs fdl (``ci.fdl``, else derived from how this fdl
            was installed).
        python: The workflow's Python.
        output: Directory of the bake file and Dockerfiles (relative to the project).
        workflow: The workflow file (relative to the repository root).
        working_directory: The project relative to the repository root (``.``).
        env: The manifest overlay the files were generated with (for the header).
        source: The manifest file(s) (``fdl.yml`` or ``fdl.yml + fdl.ci.yml``).
    """

    registry: str | None
    project: str
    tag: str
    version: str
    platforms: tuple[str, ...]
    cache_registry: bool
    cache_gha: bool
    cache_mode: str
    runner: str | tuple[str, ...]
    build_runner: str | tuple[str, ...]
    branch: str
    fdl: FdlInstall
    python: str
    output: str
    workflow: str
    working_directory: str
    env: str | None
    source: str

    @property
    def command(self) -> str:
        """The command that regenerates the files (``fdl --env ci ci generate``)."""
        return f"fdl --env {self.env} ci generate" if self.env else "fdl ci generate"


@dataclass(frozen=True)
class MatrixVariant:
    """A libtorch variant of the matrix and how CI gets it.

    Attributes:
        key: As written in ``ci.variants`` (``cpu``, ``cu130``, ``build:pascal-blackwell``).
        slug: Its short name in tags, targets and jobs (``cpu``, ``pascal-blackwell``).
        name: The installed variant (``precompiled/cpu``, ``builds/pascal-blackwell``).
        ref: What images are planned against (no directory: nothing installed).
        recipe: The build recipe, for source builds.
        install: The fdl command (argv) that installs it on a CI runner.
        cache_key: Source builds: the key of the cached result (changes with the
            recipe's settings, the manifest's ``libtorch.build`` and fdl's version).
        target: The bake target of its libtorch image.
        context: The libtorch image's build context: the installed variant's directory.
        dockerfile: The libtorch image's Dockerfile.
        pushed: A variant pushed by ``fdl libtorch push``, pinned by digest
            (``ci.pushed``): the libtorch image copies its tree from there, and CI
            neither installs nor builds it (None: CI installs or builds it).
    """

    key: str
    slug: str
    name: str
    ref: VariantRef
    recipe: str | None
    install: tuple[str, ...]
    cache_key: str | None
    target: str
    context: str
    dockerfile: str
    pushed: str | None = None
    # Source builds: fdl's estimate on a GitHub-hosted runner (minutes, ``~8h 30m``).
    hosted_estimate: tuple[int, str] | None = None

    @property
    def cuda(self) -> str | None:
        return self.ref.cuda

    @property
    def torch(self) -> str:
        return self.ref.torch or ""

    @property
    def source_build(self) -> bool:
        """Built from source in CI (a pushed variant is not, even from a recipe)."""
        return self.recipe is not None and self.pushed is None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "slug": self.slug,
            "name": self.name,
            "torch": self.ref.torch,
            "cuda": self.ref.cuda,
            "archs": list(self.ref.archs),
            "recipe": self.recipe,
            "install": " ".join(self.install),
            "cache_key": self.cache_key,
            "image": self.ref.image,
            "target": self.target,
            "context": self.context,
            "dockerfile": self.dockerfile,
            "pushed": self.pushed,
        }


@dataclass(frozen=True)
class Cell:
    """One image of the matrix: a profile built against a variant.

    Attributes:
        id: ``<profile>-<variant slug>``: bake target, cache scope.
        profile: The image profile.
        variant: The libtorch variant.
        spec: The planned image (its tag is the cell's).
        tag: The image name (the tag scheme filled in).
        args: Build arguments, sorted by name.
        context: The build context.
        dockerfile: The cell's generated Dockerfile.
        needs: Bake targets it reads (the libtorch image of its variant, if it reads one).
        cache_from, cache_to: Cache sources and exports (``type=registry,ref=...``).
        secrets: Build secrets as bake takes them (``id=pip_token,env=PIP_TOKEN``).
        test: Arguments of ``docker run --rm <tag> ...`` after the build (None: no test).
    """

    id: str
    profile: str
    variant: MatrixVariant
    spec: ImageSpec
    tag: str
    args: tuple[tuple[str, str], ...]
    context: str
    dockerfile: str
    needs: tuple[str, ...]
    cache_from: tuple[str, ...]
    cache_to: tuple[str, ...]
    secrets: tuple[str, ...]
    test: tuple[str, ...] | None

    @property
    def secret_env(self) -> tuple[str, ...]:
        """The environment variables its build secrets come from (CI maps secrets there)."""
        return tuple(secret.env for secret in self.spec.secrets if secret.env is not None)

    @property
    def kind(self) -> str:
        return self.spec.kind

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "profile": self.profile,
            "kind": self.kind,
            "variant": self.variant.key,
            "tag": self.tag,
            "args": dict(self.args),
            "context": self.context,
            "dockerfile": self.dockerfile,
            "needs": list(self.needs),
            "cache_from": list(self.cache_from),
            "cache_to": list(self.cache_to),
            "secrets": list(self.secrets),
            "test": list(self.test) if self.test is not None else None,
        }


@dataclass(frozen=True)
class Matrix:
    """The resolved build matrix: variants in the order declared, then cells
    (variant by variant, profiles in the order declared) - the build order."""

    config: CiConfig
    variants: tuple[MatrixVariant, ...]
    cells: tuple[Cell, ...]
    fdl_version: str

    def cells_of(self, variant: MatrixVariant) -> tuple[Cell, ...]:
        return tuple(cell for cell in self.cells if cell.variant.key == variant.key)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the matrix does that a reader would not expect: variants on different
        torch releases (a recipe or ``libtorch.build`` that pins its own), a source build
        a hosted runner may not finish in the time GitHub gives a job."""
        return self._mixed_releases() + self._long_builds()

    def _long_builds(self) -> tuple[str, ...]:
        from fdl.ci._data import ci_data

        data = ci_data()
        runner = self.config.build_runner
        if not isinstance(runner, str) or runner not in data.hosted_runners:
            return ()
        limit = data.timeouts["source_build"]
        machine = data.hosted_machine
        return tuple(
            f"libtorch-{v.slug}: fdl estimates this source build at {v.hosted_estimate[1]} on "
            f"a GitHub-hosted runner ({machine['cores']:g} cores, {machine['ram_gb']:g} GB), "
            f"and GitHub stops a job there after {limit} minutes. Ways out: a runner of "
            "yours (ci.build-runner: [self-hosted, linux, x64]; its job may run 2 days); "
            f"or build it once on a cluster (fdl libtorch build --recipe {v.recipe} --on "
            "TARGET pushes it to the team's registry) and take it from there in CI "
            "(fdl ci pushed prints the ci.pushed entry)"
            for v in self.variants
            # An estimate: within a fifth of the limit is too close to count on.
            if v.source_build and v.hosted_estimate and v.hosted_estimate[0] > 0.8 * limit
        )

    def _mixed_releases(self) -> tuple[str, ...]:
        releases: dict[str, list[str]] = {}
        for variant in self.variants:
            releases.setdefault(variant.torch or "?", []).append(variant.key)
        if len(releases) < 2:
            return ()
        listed = "; ".join(f"torch {t}: {', '.join(keys)}" for t, keys in sorted(releases.items()))
        return (
            f"the matrix mixes torch releases ({listed}): a pinned `torch:` in a recipe or in "
            "libtorch.build wins over ci.torch/libtorch.torch; drop the pin to build every "
            "variant on one release",
        )

    def to_json(self) -> dict[str, Any]:
        config = self.config
        return {
            "project": config.project,
            "registry": config.registry,
            "version": config.version,
            "platforms": list(config.platforms),
            "branch": config.branch,
            "source": config.source,
            "fdl_version": self.fdl_version,
            "variants": [variant.to_json() for variant in self.variants],
            "cells": [cell.to_json() for cell in self.cells],
            "warnings": list(self.warnings),
        }


def bake_path(matrix: Matrix) -> str:
    """The bake file, relative to the project (where bake runs)."""
    return f"{matrix.config.output}/docker-bake.hcl"
