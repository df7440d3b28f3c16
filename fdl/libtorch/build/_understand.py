"""Stage 1 of planning a source build (:func:`~fdl.libtorch.build._plan.plan_build`): the
request understood (pure). The ``--source`` tree (complete, the truth about the release),
the release and the archs; archs no toolkit (or no toolkit of this release) compiles are
refused at once, located where they were given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fdl.compat import (
    ArchList,
    Kind,
    NewerRelease,
    Target,
    build_constraints,
    buildable_toolkits,
    choose_toolkit,
    compilable_toolkits,
    parse_archs,
    releases_that_build,
    resolve_torch_version,
    version_key,
)
from fdl.errors import EnvironmentProblem, FdlError, UsageError
from fdl.libtorch.build._facts import MachineFacts, SourceFacts
from fdl.libtorch.build._ingredients import (
    source_build_table,
)
from fdl.libtorch.build._request import BuildRequest, Setting, located_error

__all__ = ["Asked", "understand"]


@dataclass(frozen=True)
class Asked:
    """The request, understood: what is built, for which GPUs."""

    source: SourceFacts | None
    torch: str
    archs: ArchList
    flash: bool


def understand(request: BuildRequest, facts: MachineFacts) -> Asked:
    """The --source tree (complete, the truth about the release), the release and the
    archs; archs that no toolkit, or no toolkit of this release, compiles are refused."""
    source = _source(request, facts)
    torch = _torch(request, source)
    cpu = bool(request.value("cpu", False))
    archs = ArchList() if cpu else _archs(request, facts)
    if archs:
        try:
            choose_toolkit(archs)  # no toolkit at all: say so whatever the backend
        except UsageError as exc:
            raise located_error(request.archs, exc.message, exc.hint) from None
        _check_release(request, torch, archs)
    flash = not cpu and bool(request.value("flash_attention", True))
    return Asked(source, torch, archs, flash)


def _source(request: BuildRequest, facts: MachineFacts) -> SourceFacts | None:
    """The probed ``--source`` checkout (planning reads no file itself), refused when it is
    not a complete PyTorch tree: no build script, or submodules not checked out (the build
    would stop at the first of them, seconds or half an hour in)."""
    if request.source is None:
        return None
    probed = facts.source
    if probed is None or probed.path != Path(request.source.value).resolve():
        raise ValueError(f"{request.source.value} was not probed: probe_machine(source=...)")
    if not probed.has_script:
        script = str(source_build_table()["script"])
        raise located_error(
            request.source,
            f"{request.source.value} is not a PyTorch source tree (no {script})",
            "pass the root of a PyTorch checkout (git clone --recurse-submodules)",
        )
    if probed.missing_submodules:
        raise _incomplete_tree(request.source, probed)
    return probed


def _incomplete_tree(setting: Setting[Path], source: SourceFacts) -> FdlError:
    """The refusal of a tree whose submodules are not there, with the command that fetches
    them."""
    missing = source.missing_submodules
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    message = (
        f"{setting.value} lacks {len(missing)} of its {max(source.submodules, len(missing))} "
        f"submodules (.gitmodules lists them; their directories are missing or empty): {shown}"
    )
    release = f" --torch {source.version}" if source.version else ""
    fetch = (
        f"`fdl libtorch build --fetch-only{release}` (without --source) on a machine with "
        "network clones that release with every submodule into fdl's build cache"
    )
    if source.git_checkout:
        hint = f"run `git -C {source.path} submodule update --init --recursive`, or {fetch}"
    else:
        hint = f"the tree is not a git checkout (no .git to fetch them with): {fetch}"
    where = setting.location
    return EnvironmentProblem(
        f"{setting.origin}: {message}" if where is None else message, hint=hint, location=where
    )


def _torch(request: BuildRequest, source: SourceFacts | None) -> str:
    """The release being built: a ``--source`` tree's ``version.txt`` (what will be
    compiled), else the requested one. A request that contradicts the tree is refused: the
    CUDA range, C++ standard and estimate of the wrong release would be planned."""
    wanted = request.value("torch")
    tree = source.version if source is not None else None
    if tree is not None and wanted is not None and not _same_release(str(wanted), tree):
        assert source is not None
        raise located_error(
            request.torch,
            f"torch {wanted} was asked for, but the --source tree {source.path} is torch "
            f"{tree} (its version.txt)",
            f"drop the torch setting to build {tree} from this tree, or pass --source a "
            f"checkout of v{wanted}",
        )
    try:
        return resolve_torch_version(tree or wanted)
    except NewerRelease as exc:
        # the command reads the release at run time (fdl.cli._learn) and plans again
        exc.location = located_error(request.torch, exc.message, exc.hint).location
        raise
    except UsageError as exc:
        raise located_error(request.torch, exc.message, exc.hint) from None


def _same_release(wanted: str, tree: str) -> bool:
    """``2.11`` names the tree ``2.11.0`` (a prefix); ``2.15`` or ``2.11.1`` does not."""
    try:
        asked, have = version_key(wanted), version_key(tree)
    except ValueError:
        return False
    return have[: len(asked)] == asked


def _check_release(request: BuildRequest, torch: str, archs: ArchList) -> None:
    """Refuse, before anything else, archs this release cannot target at all: its
    TORCH_CUDA_ARCH_LIST grammar, or no toolkit in its CUDA range compiles them."""
    rules = build_constraints(torch)
    codes = " + ".join(archs.codes())
    others = releases_that_build(archs)
    instead = (
        f"use torch {others[-1]} or newer (--torch {others[0]})"
        if others and version_key(others[-1]) > version_key(torch)
        else f"use torch {others[0]} (--torch {others[0]})"
        if others
        else "no release fdl knows can: build separate variants for these GPUs"
    )
    for target in archs:
        why = rules.arch_problem(target)
        if why is None:
            continue
        if target.suffix == "f":
            plain = f"{target.capability}"
            raise located_error(
                request.archs,
                f"torch {torch} cannot target {target.code}: {why}; no PyTorch release's "
                "arch list takes family targets",
                f"ask for {plain} (code for exactly that GPU) or {plain}a",
            )
        raise located_error(
            request.torch or request.archs,
            f"torch {torch} cannot target {target.code}: {why}",
            instead,
        )
    if not buildable_toolkits(torch, archs):
        able = compilable_toolkits(archs)
        span = (
            "no CUDA toolkit"
            if not able
            else f"only CUDA {able[0].version}"
            if len(able) == 1
            else f"CUDA {able[-1].version} to {able[0].version}"
        )
        raise located_error(
            request.torch or request.archs,
            f"nothing builds torch {torch} for {codes}: torch {torch} needs CUDA "
            f"{rules.cuda_min} to {rules.cuda_major_max}.x, and {span} compiles {codes}",
            instead,
        )


def _archs(request: BuildRequest, facts: MachineFacts) -> ArchList:
    if request.archs is not None:
        try:
            archs = parse_archs(str(request.archs.value))
        except UsageError as exc:
            raise located_error(request.archs, exc.message, exc.hint) from None
    elif facts.capabilities:
        archs = ArchList.of(Target(cap) for cap in facts.capabilities)
    else:
        reason = f" ({facts.gpu_reason})" if facts.gpu_reason else ""
        raise UsageError(
            f"no NVIDIA GPU detected{reason}, and no --archs given: fdl does not guess archs "
            "(PyTorch's own fallback inside Docker is a list recent nvcc rejects)",
            hint='name them: --archs "6.1;12.0" (or --cpu for a CPU-only build)',
        )
    if request.value("ptx", False) and archs.cubins:
        newest = max(archs.cubins, key=lambda t: (t.capability, t.suffix))
        archs = archs | ArchList.of([Target(newest.capability, Kind.PTX, newest.suffix)])
    return archs
