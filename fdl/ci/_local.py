"""``fdl image build --all``: the CI matrix built on this machine, in dependency order.

Each variant's libtorch image first, then the cells that read it. With ``docker buildx
bake`` available and the generated files current, the generated bake file does the
work (the same definition CI runs); otherwise the plain engine builds the same
Dockerfiles one by one. The variants must be installed here: nothing is downloaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from fdl.ci._check import find_drift
from fdl.ci._config import repository_root
from fdl.ci._matrix import Matrix, MatrixVariant
from fdl.ci._render import dockerfiles_dir, generated_files
from fdl.engine import Builder, BuildResult, Engine, LineCallback, default_engine
from fdl.errors import UsageError
from fdl.images import VariantRef
from fdl.runner import Runner, default_runner

__all__ = ["LocalBuild", "LocalStep", "bake_files_current", "build_matrix", "local_variants"]

StatusCallback = Callable[[str], None]


@dataclass(frozen=True)
class LocalStep:
    """One image made (or found up to date), in the order it happened.

    Attributes:
        kind: ``libtorch`` (a variant's image) or ``cell``.
        name: The variant (``precompiled/cpu``) or the cell (``train-cpu``).
        image: The image name (for libtorch images built by bake: their bake target).
        seconds: Wall-clock time.
        result: What the engine reported (None for bake builds and up-to-date images).
        pushed: Whether it was pushed.
    """

    kind: str
    name: str
    image: str
    seconds: float
    result: BuildResult | None = None
    pushed: bool = False


@dataclass(frozen=True)
class LocalBuild:
    """How the matrix was built (``bake`` or ``engine``) and every step, in order."""

    method: str
    steps: tuple[LocalStep, ...]


def _same_version(installed: str | None, wanted: str | None) -> bool:
    """``2.13.0+cpu`` is ``2.13.0``; ``13.0`` is ``13.0.2`` (compared on what both say)."""
    if installed is None or wanted is None:
        return installed == wanted
    have = installed.split("+", 1)[0].split(".")
    want = wanted.split("+", 1)[0].split(".")
    width = min(len(have), len(want), 3)
    return have[:width] == want[:width]


def local_variants(matrix: Matrix, project_dir: Path) -> dict[str, VariantRef]:
    """The installed variants the matrix reads, by matrix key (with their directories).

    Raises:
        UsageError: a variant is not installed, or is installed with another PyTorch or
            CUDA than the matrix asks for (the hint has the command that installs it).
    """
    from fdl.libtorch import variants
    from fdl.paths import resolve_context

    context = resolve_context(project_dir)
    found: dict[str, VariantRef] = {}
    missing: list[MatrixVariant] = []
    for variant in matrix.variants:
        if not any(cell.needs for cell in matrix.cells_of(variant)):
            continue  # its cells mount libtorch at run time: nothing to read here
        directory = variants.variant_dir(context, variant.name)
        if not (directory / "lib").is_dir():
            missing.append(variant)
            continue
        info = variants.read_info(directory, variant.name)
        wanted = (variant.torch, variant.cuda)
        if not (
            _same_version(info.torch, variant.torch) and _same_version(info.cuda, variant.cuda)
        ):
            raise UsageError(
                f"{variant.name} in {context.label()} is torch {info.torch} "
                f"(CUDA {info.cuda or 'none'}); the matrix wants torch {wanted[0]} "
                f"(CUDA {wanted[1] or 'none'})",
                hint=f"reinstall it: {' '.join(variant.install)} --force",
            )
        found[variant.key] = replace(variant.ref, directory=directory)
    if missing:
        commands = "\n".join(f"  {' '.join(v.install)}" for v in missing)
        names = ", ".join(v.name for v in missing)
        raise UsageError(
            f"the matrix needs libtorch {names}, not installed in {context.label()}",
            hint=f"install them as CI does:\n{commands}\nor build fewer variants: "
            "fdl --set 'ci.variants=[cpu]' image build --all",
        )
    return found


def build_matrix(
    matrix: Matrix,
    project_dir: Path,
    *,
    engine: Engine | None = None,
    runner: Runner | None = None,
    use_bake: bool = True,
    bake_current: bool | None = None,
    no_cache: bool = False,
    push: bool = False,
    environ: Mapping[str, str] | None = None,
    on_status: StatusCallback | None = None,
    on_line: LineCallback | None = None,
) -> LocalBuild:
    """Build every cell, each variant's libtorch image before the cells that read it.

    Args:
        matrix: The planned matrix.
        project_dir: The project (bake runs here; contexts are relative to it).
        engine: The container engine (default: the process-wide one).
        runner: Runs ``docker buildx bake`` (default: the process-wide runner).
        use_bake: Use the generated bake file when buildx is available.
        bake_current: Whether the generated files on disk match the matrix (bake is
            only used then: a stale bake file would build something else); None: look.
        no_cache: Build every step again (engine builds only).
        push: Push each cell's image when built.
        environ: Where build secrets are read (default: os.environ).
        on_status: One line per stage of the work.
        on_line: The engine's output, line by line.

    Raises:
        UsageError: a variant is missing or is the wrong one; a build secret is missing.
        EnvironmentProblem: no engine, or no BuildKit.
        CommandFailed: a build failed.
    """
    chosen = engine or default_engine()
    refs = local_variants(matrix, project_dir)
    status = on_status or (lambda _text: None)
    bake = use_bake and chosen.describe().client.builder is Builder.BUILDX
    if bake and bake_current is None:
        bake_current = bake_files_current(matrix, project_dir)
    if bake and not bake_current:
        status("the generated bake file is not current (fdl ci generate): using the engine")
        bake = False
    if bake:
        steps = _bake(
            matrix,
            project_dir,
            chosen,
            runner or default_runner(),
            (no_cache, environ),
            status,
            on_line,
        )
    else:
        steps = _engine(matrix, project_dir, chosen, refs, no_cache, environ, status, on_line)
    if push:
        steps = _push(steps, chosen, status, on_line)
    return LocalBuild("bake" if bake else "engine", tuple(steps))


def bake_files_current(matrix: Matrix, project_dir: Path) -> bool:
    """Whether the bake file and Dockerfiles on disk are what ``matrix`` makes now."""
    files = [f for f in generated_files(matrix) if f.path != matrix.config.workflow]
    return find_drift(repository_root(project_dir), files, [dockerfiles_dir(matrix)]).ok


def _engine(
    matrix: Matrix,
    project_dir: Path,
    engine: Engine,
    refs: Mapping[str, VariantRef],
    no_cache: bool,
    environ: Mapping[str, str] | None,
    status: StatusCallback,
    on_line: LineCallback | None,
) -> list[LocalStep]:
    from fdl.images import build_spec, ensure_dockerignore, ensure_libtorch_image, keyed_image

    keyed = {key: keyed_image(ref) for key, ref in refs.items()}
    requests = {}
    for cell in matrix.cells:  # every build secret is checked before anything is built
        local = refs.get(cell.variant.key)
        spec = replace(cell.spec, variant=local) if local is not None else cell.spec
        requests[cell.id] = build_spec(
            spec,
            project_dir,
            libtorch_image=keyed[cell.variant.key] if cell.needs else None,
            no_cache=no_cache,
            environ=environ,
            # Registry caches are read as image references by every BuildKit; an
            # unreachable one only warns. Exports need buildx and a login: CI's job.
            cache_from=[s for s in cell.cache_from if s.startswith("type=registry,")],
        )
    for context in dict.fromkeys(cell.context for cell in matrix.cells):
        specs = [cell.spec for cell in matrix.cells if cell.context == context]
        ignore = ensure_dockerignore(project_dir / context, specs)
        if ignore.action in ("written", "updated"):
            status(f"{ignore.action} {ignore.path}")
    steps: list[LocalStep] = []
    for variant in matrix.variants:
        local = refs.get(variant.key)
        if local is not None:
            started = time.monotonic()
            image = ensure_libtorch_image(
                local,
                engine,
                matrix.fdl_version,
                on_status=status,
                on_line=on_line,
                project_dir=project_dir,
            )
            steps.append(LocalStep("libtorch", variant.name, image, time.monotonic() - started))
        for cell in matrix.cells_of(variant):
            started = time.monotonic()
            status(f"building {cell.tag} (cell {cell.id})")
            result = engine.build(requests[cell.id], on_line=on_line)
            steps.append(LocalStep("cell", cell.id, cell.tag, time.monotonic() - started, result))
    return steps


def _bake(
    matrix: Matrix,
    project_dir: Path,
    engine: Engine,
    runner: Runner,
    options: tuple[bool, Mapping[str, str] | None],
    status: StatusCallback,
    on_line: LineCallback | None,
) -> list[LocalStep]:
    """bake builds the libtorch images as the cells need them (the steps list them with
    their bake target); secrets come from ``environ`` as in any build."""
    no_cache, environ = options
    from fdl.ci._matrix import bake_path

    client = engine.describe().client
    targets = [cell.id for cell in matrix.cells]
    status(f"docker buildx bake --file {bake_path(matrix)} ({len(targets)} cells)")
    started = time.monotonic()
    argv = [client.path, "buildx", "bake", "--file", bake_path(matrix), "--progress", "plain"]
    if no_cache:
        argv.append("--no-cache")
    runner.stream([*argv, *targets], cwd=project_dir, env=environ, on_line=on_line)
    seconds = time.monotonic() - started
    steps = [
        LocalStep("libtorch", v.name, v.target, 0.0)
        for v in matrix.variants
        if any(cell.needs for cell in matrix.cells_of(v))
    ]
    return steps + [LocalStep("cell", cell.id, cell.tag, seconds) for cell in matrix.cells]


def _push(
    steps: list[LocalStep], engine: Engine, status: StatusCallback, on_line: LineCallback | None
) -> list[LocalStep]:
    done = []
    for step in steps:
        if step.kind == "cell":
            status(f"pushing {step.image}")
            engine.push(step.image, on_line=on_line)
        done.append(replace(step, pushed=step.kind == "cell"))
    return done
