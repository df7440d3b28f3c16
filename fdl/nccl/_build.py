"""``fdl nccl build``'s executor: the planned builder image, the result copied out, checked
for code for every planned arch with fdl's fatbin reader, then installed atomically."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fdl._files import link_tree
from fdl.errors import EnvironmentProblem, FdlError
from fdl.nccl._builds import RECORD, BuiltNccl
from fdl.nccl._plan import CONTAINER, NcclPlan

if TYPE_CHECKING:
    from fdl.engine import Engine

__all__ = ["build_nccl", "check_library"]


def _copy_source(source: Path, dest: Path) -> None:
    """The source tree into the build context (hard links where possible; no build tree)."""
    link_tree(source, dest, skip=frozenset({"build", ".git"}))


def check_library(library: Path, wanted: tuple[str, ...], *, within: Path) -> list[str]:
    """The planned codes (``sm_61``, ``compute_120``) that ``library`` holds no code for.

    Raises:
        FdlError: no library, a link leading out of ``within``, or a damaged fatbin.
    """
    from fdl.binaries import BinaryFormatError, read_device_code

    real = library.resolve()
    if not real.is_file() or not real.is_relative_to(within.resolve()):
        raise FdlError(
            f"the build produced no {library.name} (looked for {library})",
            hint="read the build log; NCCL's `make src.build` writes build/lib/libnccl.so.2",
        )
    try:
        code = read_device_code(real)
    except (BinaryFormatError, OSError) as exc:
        raise FdlError(f"{library}: its GPU code cannot be read: {exc}") from None
    held = {*code.cubin_archs, *code.ptx_archs}
    return [arch for arch in wanted if arch not in held]


def _record(plan: NcclPlan) -> str:
    data = {
        "tag": plan.tag,
        "version": plan.version,
        "archs": list(plan.archs),
        "cuda": plan.cuda,
        "variant": plan.variant,
        "source": {"kind": plan.source_kind, "location": plan.source},
        "base_image": plan.base_image,
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _install(staging: Path, output: Path) -> None:
    """``staging`` becomes ``output`` in one rename; a former build is removed after."""
    old = output.with_name(f".{output.name}.old-{os.getpid()}")
    if output.exists():
        output.rename(old)
    staging.rename(output)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


def build_nccl(
    plan: NcclPlan,
    *,
    log_file: Path,
    on_line: Callable[[str], None] | None = None,
) -> BuiltNccl:
    """Run ``plan``: build the image (fetch stage with the network, compile stage without),
    copy ``lib/`` and ``include/`` out, check the device code, install into ``plan.output``.

    Raises:
        EnvironmentProblem: no docker engine, or one without BuildKit.
        LockBusy: another fdl nccl build of the same output is running.
        CommandFailed: the image build failed (the log file has everything).
        FdlError: the library lacks code for a planned arch (nothing is installed).
    """
    from fdl.engine import default_engine

    engine = default_engine()
    if not engine.describe().client.builder.has_buildkit:
        raise EnvironmentProblem(
            "the docker client has no BuildKit; the NCCL builder needs RUN --mount",
            hint="install the buildx plugin, or set FDL_DOCKER to a docker client with BuildKit",
        )
    from fdl.locking import FileLock

    log_file.parent.mkdir(parents=True, exist_ok=True)
    plan.output.parent.mkdir(parents=True, exist_ok=True)
    # beside the variants' locks (libtorch/.locks/), not among the builds
    lock = plan.output.parents[2] / ".locks" / f"nccl-{plan.output.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock, timeout=0, purpose=f"fdl nccl build of {plan.output.name}"):
        return _build_locked(engine, plan, log_file, on_line)


def _build_locked(
    engine: Engine, plan: NcclPlan, log_file: Path, on_line: Callable[[str], None] | None
) -> BuiltNccl:
    from fdl.engine import BuildSpec
    from fdl.paths import owner_labels

    with tempfile.TemporaryDirectory(prefix="fdl-nccl-build-") as scratch_name:
        context = Path(scratch_name) / "context"
        context.mkdir()
        if plan.source_kind == "dir":
            _copy_source(Path(plan.source), context / "src")
        spec = BuildSpec(
            context=context,
            dockerfile_text=plan.dockerfile,
            tags=(plan.image,),
            labels={"org.fdl.nccl": plan.tag, **owner_labels()},
        )
        fetch = replace(spec, target="fetch", tags=(f"{plan.image}-fetch",))
        engine.build(fetch, on_line=on_line, log_file=log_file)
        engine.build(
            replace(spec, target="compile", network="none"), on_line=on_line, log_file=log_file
        )
    staging = Path(tempfile.mkdtemp(prefix=f".{plan.output.name}.part-", dir=plan.output.parent))
    try:
        engine.copy_out(plan.image, CONTAINER["output"], staging)
        missing = check_library(staging / "lib" / "libnccl.so.2", plan.archs, within=staging)
        if missing:
            raise FdlError(
                f"the NCCL built for {' '.join(plan.archs)} holds no code for "
                f"{' '.join(missing)}; nothing was installed (full log: {log_file})",
                hint="check that NVCC_GENCODE reached NCCL's make (the plan: fdl nccl build "
                "--dry-run --json) and that the toolkit supports those archs",
            )
        (staging / RECORD).write_text(_record(plan), encoding="utf-8")
        _install(staging, plan.output)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return BuiltNccl(plan.output, plan.version, plan.tag, plan.archs, plan.variant)
