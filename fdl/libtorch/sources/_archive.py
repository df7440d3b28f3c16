"""``fdl libtorch download``: plan (pure), then fetch, check and install an official zip.

:func:`plan_download` turns a :class:`~fdl.libtorch._select.Selection` into a
:class:`DownloadPlan` (URL built from the data, mirror applied, target, expected
``build-version``) without touching the disk or the network, so ``--dry-run --json`` prints
exactly what a real run does. :func:`run_download` executes it through :mod:`fdl.net`
(streaming, retries, HTTP Range resume, size check), tests the zip, checks its
``build-version``, records its sha256, extracts it safely with :mod:`fdl.archive` and
installs it as a :class:`FromArchive` source (:func:`~fdl.libtorch.sources.install_source`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from fdl._files import atomic_write_text, read_small_text
from fdl.archive import ArchiveError, read_member, safe_extract_zip, test_zip
from fdl.compat import Variant, archive_layout, current_platform, libtorch_url, release
from fdl.errors import EnvironmentProblem, FdlError, NetworkError, UsageError
from fdl.libtorch import variants
from fdl.libtorch._install import (
    InstallResult,
    Target,
    check_replaceable,
    installed_build_version,
    protected_paths,
    resolve_target,
    variant_lock,
)
from fdl.libtorch._select import Selection
from fdl.libtorch.sources import install_source, occupied
from fdl.net import DownloadResult, Progress, download, rebase_url
from fdl.paths import Context, own_cache_dir

__all__ = [
    "MIRROR_ENV",
    "DownloadPlan",
    "FromArchive",
    "ProgressCallback",
    "check_download_target",
    "plan_download",
    "run_download",
]

MIRROR_ENV = "FDL_LIBTORCH_MIRROR"

ProgressCallback = Callable[[int, int | None, float], None]
MessageCallback = Callable[[str], None]


@dataclass(frozen=True)
class DownloadPlan:
    """Everything a download will do.

    Attributes:
        selection: Which build, and why.
        target: Where it is installed.
        url: The URL fetched (on the mirror when one is set).
        upstream_url: The official URL.
        mirror: The mirror base URL, if any.
        archive: Where the zip is saved while installing.
        activate: Whether ``.active`` will point at it.
        notes: Things the user should know about the plan (``--path`` outside the layout).
    """

    selection: Selection
    target: Target
    url: str
    upstream_url: str
    mirror: str | None
    archive: Path
    activate: bool
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"libtorch {self.selection.torch_version} ({self.selection.variant})"

    def to_json(self) -> dict[str, Any]:
        return {
            **self.selection.to_json(),
            "name": self.target.name,
            "target": str(self.target.path),
            "url": self.url,
            "upstream_url": self.upstream_url,
            "mirror": self.mirror,
            "archive": str(self.archive),
            "build_version": self.selection.build_version,
            "activate": self.activate,
            "notes": list(self.notes),
        }


def plan_download(
    selection: Selection,
    context: Context,
    cache: Path,
    *,
    name: str | None = None,
    path: Path | None = None,
    mirror: str | None = None,
    activate: bool = True,
) -> DownloadPlan:
    """The download of ``selection`` into ``context`` (nothing is touched).

    Args:
        selection: From :func:`~fdl.libtorch._select.select_variant`.
        context: The libtorch root.
        cache: The download cache directory (the zip goes to ``<cache>/libtorch/``).
        name: Variant name under ``precompiled/`` (default: the variant, ``cu130``).
        path: Install there instead (``--path``); a path outside the layout is not activated.
        mirror: Base URL of a mirror of download.pytorch.org (same paths).

    Raises:
        UsageError: an invalid name, or no official zip for this platform.
    """
    # a ROCm build goes where floDl's CLI puts it: precompiled/rocm70 for rocm7.0
    default = selection.variant.replace(".", "") if selection.rocm else selection.variant
    target = resolve_target(context, f"precompiled/{name or default}", path)
    upstream = libtorch_url(selection.torch_version, selection.variant, platform=current_platform())
    url = rebase_url(upstream, mirror) if mirror else upstream
    filename = unquote(urlsplit(upstream).path.rsplit("/", 1)[-1])
    notes: list[str] = []
    if activate and target.name is None:
        notes.append(
            f"{target.path} is outside {context.libtorch_dir}: installed there, not activated"
        )
    return DownloadPlan(
        selection=selection,
        target=target,
        url=url,
        upstream_url=upstream,
        mirror=mirror,
        archive=cache / "libtorch" / filename,
        activate=activate and target.name is not None,
        notes=tuple(notes),
    )


@dataclass
class FromArchive:
    """An official libtorch zip, as :func:`plan_download` planned it: the ``archive`` source.

    :meth:`fetch` downloads and tests the zip (once; a zip an earlier run verified is not
    fetched again); :meth:`populate` extracts it, fetching it first if that was not done.

    Attributes:
        plan: What is downloaded, and where it goes.
        on_progress: Download progress in bytes.
        on_message: Told what is being done.
        transfer: Extra keyword arguments for :func:`fdl.net.download` (``retry``, ``sleep``).
    """

    plan: DownloadPlan
    on_progress: ProgressCallback | None = None
    on_message: MessageCallback | None = None
    transfer: Mapping[str, Any] = field(default_factory=dict)
    _fetched: tuple[DownloadResult, Variant | None] | None = field(
        default=None, init=False, repr=False
    )

    kind = "archive"

    @property
    def default_name(self) -> str:
        return f"precompiled/{self.plan.selection.variant}"

    def describe(self) -> str:
        return f"{self.plan.label} from {self.plan.url}"

    def is_current(self, path: Path) -> bool:
        return installed_build_version(path) == self.plan.selection.build_version

    def refusal(self, target: Target) -> UsageError:
        found = installed_build_version(target.path)
        selection = self.plan.selection
        return occupied(
            target,
            found or "(unknown version)",
            selection.build_version,
            hint=f"replace it with --force, or install side by side with --name "
            f"{selection.variant}-{selection.torch_version}",
        )

    def fetch(self) -> None:
        """Download and test the zip (nothing when this source fetched it already)."""
        self._checked()

    def _checked(self) -> tuple[DownloadResult, Variant | None]:
        if self._fetched is not None:
            return self._fetched
        plan, say = self.plan, self.on_message or _ignore
        result = _fetch(plan, self.on_progress, say, self.transfer)
        say(f"testing {plan.archive.name}")
        try:
            test_zip(plan.archive)
            check_build_version(plan.archive, plan.selection.build_version, plan.url)
        except FdlError:
            _forget_archive(plan)  # a bad file must not be taken for a finished download
            raise
        # Verified: a run killed from here on (extraction, install) reuses the file.
        _record_verified(plan, result.sha256, result.size)
        selection = plan.selection
        variant = (
            None if selection.rocm else release(selection.torch_version).variant(selection.variant)
        )
        self._fetched = (result, variant)
        return self._fetched

    def populate(self, tree: Path) -> variants.VariantInfo:
        result, variant = self._checked()
        plan = self.plan
        (self.on_message or _ignore)(f"extracting into {plan.target.path}")
        safe_extract_zip(plan.archive, tree, strip_prefix=archive_layout().top)
        if variant is None:  # a ROCm build: its gfx list is the table's, the binaries' later
            from fdl.compat.rocm import rocm_build

            cudnn = None
            requested = list(rocm_build(plan.selection.torch_version, plan.selection.variant).gfx)
        else:
            cudnn = variant.cudnn
            # a release read from its METADATA only: its archs are unknown (not guessed)
            requested = (
                []
                if variant.archs_unread
                else variant.targets_for(plan.selection.torch_version).codes()
            )
        return variants.VariantInfo(
            name=plan.target.name or plan.target.path.name,
            torch=plan.selection.torch_version,
            cuda=plan.selection.cuda,
            cudnn=cudnn,
            archs_requested=requested,
            abi="cxx11",
            extra={"rocm": plan.selection.rocm} if plan.selection.rocm else {},
            source={
                "kind": "archive",
                "variant": plan.selection.variant,
                "build_version": plan.selection.build_version,
                "url": plan.upstream_url,
                "fetched_from": result.url,
                "sha256": result.sha256,
                "size": result.size,
            },
        )


def _ignore(_text: str) -> None:
    pass


def check_build_version(archive: Path, expected: str, url: str) -> str:
    """The archive's ``libtorch/build-version``; raise when it is not ``expected``."""
    layout = archive_layout()
    member = f"{layout.top}/{layout.version_file}"
    try:
        text = read_member(archive, member).decode("utf-8", errors="replace").strip()
    except ArchiveError as exc:
        raise EnvironmentProblem(
            f"{archive.name} from {url} is not an official libtorch zip: {exc.message}",
            hint="check the mirror (it must serve download.pytorch.org's files unchanged)",
        ) from None
    if text != expected:
        raise EnvironmentProblem(
            f"{archive.name} from {url} holds libtorch {text or '(empty build-version)'}, "
            f"expected {expected}",
            hint="the server sent another build than asked for; check the mirror's content",
        )
    return text


def check_download_target(
    plan: DownloadPlan, context: Context, *, force: bool = False
) -> list[tuple[str, Path]]:
    """Refuse a target the download may not replace (what ``--dry-run`` checks too): one
    fdl did not make, unless ``force``; a protected path or a special file, never.

    Returns:
        The protected paths (for the install).

    Raises:
        UsageError: with the fix.
    """
    protected = protected_paths(context)
    existing = plan.target.path
    if not (existing / "lib").is_dir() or not FromArchive(plan).is_current(existing):
        check_replaceable(existing, force=force, protected=protected)
    return protected


def run_download(
    plan: DownloadPlan,
    context: Context,
    *,
    force: bool = False,
    keep_archive: bool = False,
    on_progress: ProgressCallback | None = None,
    on_message: MessageCallback | None = None,
    transfer: Mapping[str, Any] | None = None,
) -> InstallResult:
    """Execute ``plan``: download, verify, extract, install, activate.

    Args:
        transfer: Extra keyword arguments for :func:`fdl.net.download` (``retry``, ``sleep``).

    Raises:
        NetworkError: the download failed (404, retries exhausted, size mismatch).
        EnvironmentProblem: the zip is damaged or holds another build.
        ArchiveError: the zip holds unsafe members (nothing is written outside the target).
    """
    say = on_message or _ignore
    source = FromArchive(plan, on_progress, say, transfer or {})
    existing = plan.target.path
    # Refused before the lock and the download: a refusal leaves no trace and costs nothing.
    protected = check_download_target(plan, context, force=force)
    own_cache_dir(plan.archive.parent)  # the zips' cache: `fdl cache clean downloads`
    # The whole run holds the variant's lock: a second run waits, then finds it installed.
    with variant_lock(plan.target, purpose=f"downloading {plan.label}", on_wait=say):
        if not force and (existing / "lib").is_dir():
            # this build (kept, activated) or another one (refused): nothing is fetched
            return install_source(
                context, source, target=plan.target, activate=plan.activate, locked=True
            )
        source.fetch()
        try:
            installed = install_source(
                context,
                source,
                target=plan.target,
                activate=plan.activate,
                locked=True,
                force=force,
                protected=protected,
            )
        except FdlError:
            _forget_archive(plan)  # refused or damaged: do not keep it for the next run
            raise
    if not keep_archive:
        _forget_archive(plan)
    return installed


def _record_path(plan: DownloadPlan) -> Path:
    return plan.archive.with_name(plan.archive.name + ".verified.json")


def _record_verified(plan: DownloadPlan, sha256: str, size: int) -> None:
    """Note that the archive was downloaded whole and tested, so that a later run (after a
    kill during extraction) takes it instead of downloading gigabytes again."""
    record = {
        "url": plan.upstream_url,
        "build_version": plan.selection.build_version,
        "sha256": sha256,
        "size": size,
    }
    atomic_write_text(_record_path(plan), json.dumps(record, sort_keys=True) + "\n")


def _verified_sha256(plan: DownloadPlan) -> str | None:
    """The sha256 of an archive an earlier run downloaded and tested, if it is that build."""
    try:
        text = read_small_text(_record_path(plan), limit=4096)
        record = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("url") != plan.upstream_url:
        return None
    if record.get("build_version") != plan.selection.build_version:
        return None
    sha256 = record.get("sha256")
    return sha256 if isinstance(sha256, str) and plan.archive.is_file() else None


def _forget_archive(plan: DownloadPlan) -> None:
    for path in (plan.archive, _record_path(plan)):
        with contextlib.suppress(OSError):
            path.unlink()


def _fetch(
    plan: DownloadPlan,
    on_progress: ProgressCallback | None,
    say: MessageCallback,
    transfer: Mapping[str, Any],
) -> Any:
    def report(progress: Progress) -> None:
        if on_progress is not None:
            on_progress(progress.done, progress.total, progress.rate)

    hint = (
        f"PyTorch {plan.selection.torch_version} may not publish a {plan.selection.variant} zip "
        "for this platform"
        + (f", or the mirror {plan.mirror} lacks it" if plan.mirror else "")
        + "; `fdl libtorch install --from-wheel` installs the same build from PyPI"
    )
    try:
        return download(
            plan.upstream_url,
            plan.archive,
            sha256=_verified_sha256(plan),  # an archive already verified is not fetched again
            mirror=plan.mirror,
            on_progress=report,
            label=plan.label,
            not_found_hint=hint,
            on_wait=say,
            **transfer,
        )
    except NetworkError as exc:
        wheel = f"fdl libtorch install --from-wheel --torch {plan.selection.torch_version}"
        if exc.hint is None:
            exc.hint = (
                f"set a mirror with {MIRROR_ENV} or libtorch.mirror in fdl.yml, or install "
                f"from PyPI: {wheel}"
            )
        elif "--from-wheel" not in exc.hint:
            exc.hint += f"; or install from PyPI instead: {wheel}"
        raise
