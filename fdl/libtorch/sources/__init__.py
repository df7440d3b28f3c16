"""Where a libtorch variant comes from: one interface, six sources.

A source is what :class:`VariantSource` describes: its ``kind``, the variant it installs to
by default, a line saying what it installs, whether an installed variant already is that,
and how it fills a staging tree. :func:`install_source` installs any of them through
:func:`~fdl.libtorch.install_tree` (target, the ``--force`` rule, lock, staging, atomic
rename, activation); the public install functions are thin wrappers around it:

==============  =====================  =====================================================
kind            source                 installed by
==============  =====================  =====================================================
``archive``     :class:`FromArchive`   :func:`plan_download` + :func:`run_download`
``wheel``       :class:`FromWheel`     :func:`wheel_source` + :func:`install_wheel`
``cpu-view``    :class:`FromCpuView`   :func:`install_cpu_view`
``registry``    :class:`FromRegistry`  :func:`pull_variant` (:func:`find_shared` looks)
``build``       :class:`FromBuild`     :func:`register_variant` (:mod:`fdl.libtorch.build`)
``directory``   :class:`FromDirectory` :func:`install_dir`
==============  =====================  =====================================================

Which source a command takes is decided above them, by one chooser
(:func:`fdl.libtorch.choose_source`: each source's offer, ranked by a table kept as data).

Lazy (PEP 562), as :mod:`fdl.libtorch` is: a source's modules load when one of its names
is first used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fdl._lazy import lazy_attribute
from fdl.errors import UsageError
from fdl.libtorch import variants
from fdl.libtorch._install import InstallResult, Target, install_tree, resolve_target
from fdl.paths import Context

KINDS = ("archive", "wheel", "cpu-view", "registry", "build", "directory")
"""The sources' kinds (:attr:`VariantSource.kind`)."""

REPLACE_HINT = "replace it with --force, or choose another name with --name"


class VariantSource(Protocol):
    """Where a variant comes from: what every source is.

    A source is made from what was asked (a download plan, a wheel, a release on an index,
    a registry's image, a tree on disk); reading what it names (a network lookup) happens
    before, or on first need, never while it is only described.
    """

    @property
    def kind(self) -> str:
        """One of :data:`KINDS`."""
        ...

    @property
    def default_name(self) -> str:
        """The variant it installs to when no name is given (``precompiled/cu130``)."""
        ...

    def describe(self) -> str:
        """What it installs, in one line (for plans and ``--dry-run``)."""
        ...

    def is_current(self, path: Path) -> bool:
        """True when the variant installed at ``path`` already is what it would install
        (then nothing is written)."""
        ...

    def refusal(self, target: Target) -> UsageError | None:
        """Why it does not replace ``target``, which holds a libtorch that is not current,
        without ``force``; None where it replaces it (what fdl made)."""
        ...

    def populate(self, tree: Path) -> variants.VariantInfo:
        """Fill the staging directory ``tree`` (not yet existing) with the libtorch tree;
        return what it knows of it (:func:`~fdl.libtorch.install_tree` completes it from
        the binaries)."""
        ...


def install_source(
    context: Context,
    source: VariantSource,
    *,
    name: str | None = None,
    target: Target | None = None,
    force: bool = False,
    activate: bool = True,
    on_wait: Callable[[str], None] | None = None,
    locked: bool = False,
    protected: list[tuple[str, Path]] | None = None,
) -> InstallResult:
    """Install ``source`` as variant ``name`` (default: :attr:`VariantSource.default_name`),
    or at ``target``, through :func:`~fdl.libtorch.install_tree`.

    A target that holds a libtorch the source does not install is replaced only with
    ``force`` (unless the source's :meth:`~VariantSource.refusal` allows it); one that is
    current is kept (and activated) unless ``force``.

    Args:
        context: The libtorch root.
        source: What is installed.
        name: The full variant name (``precompiled/cu130``).
        target: Where, already resolved (a download plan's ``--path``); ``name`` is then
            not used.
        force: Replace what the target holds, even a current variant (never a protected
            path, see :func:`~fdl.libtorch._install.check_replaceable`).
        activate: Point ``.active`` at it (only for variants in the layout).
        on_wait: Told when another process holds the variant's lock.
        locked: The caller holds the variant's lock already.
        protected: What is never replaced (default: the install's own list).

    Raises:
        UsageError: the source's refusal, or the target holds something fdl did not make.
    """
    where = target or resolve_target(context, name or source.default_name)
    if not force and (where.path / "lib").is_dir() and not source.is_current(where.path):
        refused = source.refusal(where)
        if refused is not None:
            raise refused
    return install_tree(
        context,
        where,
        source.populate,
        is_current=None if force else source.is_current,
        activate=activate,
        on_wait=on_wait,
        locked=locked,
        force=force,
        protected=protected,
    )


def occupied(target: Target, holds: str, wanted: str, *, hint: str = REPLACE_HINT) -> UsageError:
    """The refusal of a target that holds another libtorch (``holds``, its build version)
    than ``wanted``. A CPU view is said as one: its build version is the CUDA wheel's
    (``2.13.0+cu130``), which alone reads as a CUDA libtorch."""
    where = target.name or str(target.path)
    info = variants.read_info(target.path, target.name or "")
    if info.source.get("view") == "cpu":
        wheel = info.source.get("build_version") or holds
        holds = f"the CPU view of the torch {wheel} wheel (CPU only)"
    else:
        holds = f"libtorch {holds}"
    return UsageError(f"{where} already holds {holds}, not {wanted}", hint=hint)


# <lazy-exports> generated from the modules' __all__ by `python -m fdl._lazy_tables --write`
if TYPE_CHECKING:
    from fdl.libtorch.sources._archive import (
        MIRROR_ENV,
        DownloadPlan,
        FromArchive,
        ProgressCallback,
        check_download_target,
        plan_download,
        run_download,
    )
    from fdl.libtorch.sources._build import FromBuild
    from fdl.libtorch.sources._cpu_view import FromCpuView, install_cpu_view, local_wheel
    from fdl.libtorch.sources._directory import FromDirectory, install_dir, register_variant
    from fdl.libtorch.sources._push import PushResult, choose_compression, push_variant
    from fdl.libtorch.sources._registry import (
        REGISTRY_ENV,
        FromRegistry,
        PullResult,
        parse_reference,
        pull_variant,
    )
    from fdl.libtorch.sources._team import RepositoryNotFound, SharedMatch, find_shared
    from fdl.libtorch.sources._wheel import (
        check_wheel,
        install_wheel,
        installed_torch,
        wheel_source,
    )
    from fdl.libtorch.sources._wheel_tree import FromWheel, WheelSource
_HOMES = {
    "MIRROR_ENV": "_archive",
    "DownloadPlan": "_archive",
    "FromArchive": "_archive",
    "ProgressCallback": "_archive",
    "check_download_target": "_archive",
    "plan_download": "_archive",
    "run_download": "_archive",
    "FromBuild": "_build",
    "FromCpuView": "_cpu_view",
    "install_cpu_view": "_cpu_view",
    "local_wheel": "_cpu_view",
    "FromDirectory": "_directory",
    "install_dir": "_directory",
    "register_variant": "_directory",
    "PushResult": "_push",
    "choose_compression": "_push",
    "push_variant": "_push",
    "REGISTRY_ENV": "_registry",
    "FromRegistry": "_registry",
    "PullResult": "_registry",
    "parse_reference": "_registry",
    "pull_variant": "_registry",
    "RepositoryNotFound": "_team",
    "SharedMatch": "_team",
    "find_shared": "_team",
    "check_wheel": "_wheel",
    "install_wheel": "_wheel",
    "installed_torch": "_wheel",
    "wheel_source": "_wheel",
    "FromWheel": "_wheel_tree",
    "WheelSource": "_wheel_tree",
}
# </lazy-exports>

__all__ = [
    "KINDS",
    "MIRROR_ENV",
    "REGISTRY_ENV",
    "REPLACE_HINT",
    "DownloadPlan",
    "FromArchive",
    "FromBuild",
    "FromCpuView",
    "FromDirectory",
    "FromRegistry",
    "FromWheel",
    "ProgressCallback",
    "PullResult",
    "PushResult",
    "RepositoryNotFound",
    "SharedMatch",
    "VariantSource",
    "WheelSource",
    "check_download_target",
    "check_wheel",
    "choose_compression",
    "find_shared",
    "install_cpu_view",
    "install_dir",
    "install_source",
    "install_wheel",
    "installed_torch",
    "local_wheel",
    "occupied",
    "parse_reference",
    "plan_download",
    "pull_variant",
    "push_variant",
    "register_variant",
    "run_download",
    "wheel_source",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, None, name)
