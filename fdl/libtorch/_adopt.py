"""Variants made from what already exists: a PyTorch wheel, or a libtorch tree on disk.

``fdl libtorch install --from-wheel`` (or ``--from-dir``) and the wheel path of
``fdl setup`` call these; so can any Python code (no CLI involved)::

    from fdl.libtorch import install_wheel, wheel_source

    source = wheel_source(torch="2.13", cache=cache / "wheels", runner=default_runner())
    result = install_wheel(context, source, cache=cache / "wheels", runner=default_runner())
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from fdl.checks import Check, Severity
from fdl.compat import resolve_torch_version
from fdl.errors import UsageError
from fdl.libtorch import variants
from fdl.libtorch._deps import library_checks
from fdl.libtorch._install import (
    InstallResult,
    install_tree,
    installed_build_version,
    register_variant,
    resolve_target,
)
from fdl.libtorch._wheel import (
    NvidiaOptions,
    WheelSource,
    populate_from_wheel,
    wheel_from_environment,
    wheel_from_file,
    wheel_from_pip,
)
from fdl.net import Progress
from fdl.paths import Context
from fdl.runner import Runner

__all__ = [
    "install_cpu_view",
    "install_dir",
    "install_wheel",
    "unresolved_libraries",
    "wheel_source",
]

Callback = Callable[[str], None]


def _ignore(_text: str) -> None:
    pass


def wheel_source(
    *,
    cache: Path,
    runner: Runner,
    wheel: Path | None = None,
    python: str | None = None,
    torch: str | None = None,
    index_url: str | None = None,
    on_message: Callback | None = None,
    on_line: Callback | None = None,
) -> WheelSource:
    """The wheel to install: a ``.whl`` file, a Python environment's torch, or pip's download.

    Args:
        cache: Where ``pip download`` puts wheels (``<cache>/wheels``).
        runner: Runs the environment's Python or pip.
        wheel: A ``.whl`` file (first choice).
        python: A Python whose installed torch is copied (second choice).
        torch: The torch version pip downloads (``2.13`` or ``2.13.0``; None: the newest
            known release).
        index_url: A PyPI mirror for pip.
        on_message: Told what is being done.
        on_line: Gets pip's output.

    Raises:
        UsageError: an unusable wheel or environment.
    """
    if wheel is not None:
        return wheel_from_file(wheel.expanduser())
    if python is not None:
        return wheel_from_environment(python, runner)
    exact = torch if torch and torch.count(".") >= 2 else resolve_torch_version(torch)
    _check_index_variant(exact, index_url)
    (on_message or _ignore)(f"pip download torch=={exact} --no-deps")
    return wheel_from_pip(
        exact, cache, python=sys.executable, runner=runner, index_url=index_url, on_line=on_line
    )


def _check_index_variant(version: str, index_url: str | None) -> None:
    """An index of download.pytorch.org's form (``.../whl/cu129``) for a build the release
    does not publish as a wheel: refused before pip runs (pip would fall back to another
    index, or fail with "no matching distribution"). Wheel-only builds are known."""
    from fdl.compat import wheel_variant_problem
    from fdl.libtorch._wheel import index_variant

    variant = None if index_url and "/nightly/" in index_url else index_variant(index_url)
    problem = wheel_variant_problem(version, variant) if variant else None
    if problem is not None:
        raise UsageError(
            f"{problem}: nothing was downloaded",
            hint="pass an index of one of them (https://download.pytorch.org/whl/<variant>)",
        )


def install_wheel(
    context: Context,
    source: WheelSource,
    *,
    cache: Path,
    runner: Runner,
    name: str | None = None,
    force: bool = False,
    nvidia: bool = True,
    index_url: str | None = None,
    activate: bool = True,
    on_message: Callback | None = None,
    on_line: Callback | None = None,
) -> InstallResult:
    """Install ``source`` as ``precompiled/<name or variant>`` (atomically, under the lock).

    An existing variant of the same build is kept; one of another build is replaced only
    with ``force``.

    Args:
        context: The libtorch root.
        source: From :func:`wheel_source`.
        cache: Where the NVIDIA wheels pip fetches are kept.
        runner: Runs pip.
        name: Variant name under ``precompiled/`` (default: the wheel's variant, ``cu130``).
        force: Replace a different build (or a directory fdl did not make).
        nvidia: Bring the NVIDIA libraries a CUDA wheel needs into ``lib/``.
        index_url: A PyPI mirror for pip.
        activate: Make it the active variant.
        on_message: Told what is being done and when another process holds the lock.
        on_line: Gets pip's output and per-wheel progress.

    Raises:
        UsageError: the variant holds another libtorch build and ``force`` is not set.
    """
    target = resolve_target(context, f"precompiled/{name or source.variant}")
    wanted = source.build_version
    found = installed_build_version(target.path) if (target.path / "lib").is_dir() else None
    if found and found != wanted and not force:
        raise UsageError(
            f"{target.name} already holds libtorch {found}, not {wanted}",
            hint="replace it with --force, or choose another name with --name",
        )
    options = NvidiaOptions(bundle=nvidia, python=sys.executable, cache=cache, index_url=index_url)

    def is_current(path: Path) -> bool:
        return installed_build_version(path) == wanted

    return install_tree(
        context,
        target,
        lambda tree: populate_from_wheel(source, tree, runner, options, on_message, on_line),
        is_current=None if force else is_current,
        activate=activate,
        on_wait=on_message,
        force=force,
    )


def install_cpu_view(
    context: Context,
    *,
    cache: Path,
    torch: str | None = None,
    wheel: Path | None = None,
    index_url: str | None = None,
    name: str | None = None,
    force: bool = False,
    activate: bool = True,
    on_message: Callback | None = None,
    on_progress: Callable[[str, Progress], None] | None = None,
) -> InstallResult:
    """Install the CPU view of a torch wheel (:mod:`fdl.libtorch._cpu_view`) as
    ``precompiled/<name or cpu>``: the wheel on the index (``torch``, the newest known
    release when None) or a ``.whl`` file, read member by member. ``index_url`` is where
    the wheel and the NVIDIA wheels it pins are found (a file's NVIDIA wheels too).

    An existing view of the same wheel is kept; another build is replaced only with
    ``force``.

    Raises:
        UsageError: no such wheel, or the variant holds another build.
        NetworkError: the index or its file host cannot be read.
    """
    from fdl.libtorch._cpu_view import CpuView, find_cpu_view, local_wheel, populate_cpu_view

    if wheel is not None:
        found, index = local_wheel(wheel.expanduser()), None
        release = found.version.split("+", 1)[0]
    else:
        release = torch if torch and torch.count(".") >= 2 else resolve_torch_version(torch)
        (on_message or _ignore)(f"looking up torch {release} on the package index")
        found, index = find_cpu_view(release, index_url)
    target = resolve_target(context, f"precompiled/{name or 'cpu'}")
    label = target.name or target.path.name
    present = variants.read_info(target.path, label) if (target.path / "lib").is_dir() else None

    def same_wheel(info: variants.VariantInfo | None) -> bool:
        return bool(
            info
            and info.source.get("view") == "cpu"
            and info.source.get("wheel_version") == found.version
            and info.torch == release
        )

    built = installed_build_version(target.path) if present is not None else None
    if present is not None and not same_wheel(present) and not force:
        raise UsageError(
            f"{target.name} already holds libtorch {built or 'of another build'}, not the CPU "
            f"view of torch {found.version}",
            hint="replace it with --force, or choose another name with --name",
        )
    # a local wheel's NVIDIA wheels come from --index-url too, as the index's wheel's do
    nvidia_index = index_url if index is None else None
    view = CpuView(torch=release, wheel=found, index=index, nvidia_index=nvidia_index)

    def is_current(path: Path) -> bool:
        return same_wheel(variants.read_info(path, label))

    return install_tree(
        context,
        target,
        lambda tree: populate_cpu_view(
            view, tree, cache, on_line=on_message, on_progress=on_progress
        ),
        is_current=None if force else is_current,
        activate=activate,
        on_wait=on_message,
        force=force,
    )


def install_dir(
    context: Context,
    tree: Path,
    *,
    name: str | None = None,
    force: bool = False,
    activate: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> InstallResult:
    """Add an existing libtorch tree (``lib/``, ``include/``, ``share/``) as a variant.

    The tree is copied to ``precompiled/<name or its directory name>`` (a name with a ``/``
    is used as given); a tree that already sits there is adopted in place.

    Raises:
        UsageError: ``tree`` has no ``lib/``, or the variant exists and ``force`` is not set.
    """
    tree = tree.expanduser().absolute()
    if not (tree / "lib").is_dir():
        raise UsageError(
            f"{tree} is not a libtorch tree (no lib/)", hint="pass the libtorch directory"
        )
    chosen = name or tree.name
    full = chosen if "/" in chosen else f"precompiled/{chosen}"
    existing = variants.variant_dir(context, full)
    in_place = existing.resolve() == tree.resolve()  # adopted where it lies, nothing replaced
    if existing.exists() and not in_place and not force:
        raise UsageError(
            f"{variants.validate_name(full)} is already installed",
            hint="replace it with --force, or choose another name with --name",
        )
    info = variants.VariantInfo(name=full, source={"kind": "directory", "directory": str(tree)})
    return register_variant(
        context, full, tree, info, activate=activate, move=False, force=force, on_wait=on_wait
    )


def unresolved_libraries(result: InstallResult) -> list[Check]:
    """The errors of a fresh variant whose libraries need something it does not contain."""
    if not result.installed:
        return []
    checks = library_checks(result.target.path, result.info)
    return [c for c in checks if c.severity is Severity.ERROR]
