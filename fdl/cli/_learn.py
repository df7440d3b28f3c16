"""A torch release newer than fdl's reviewed tables, read at run time.

The planners stay pure: for a release newer than the tables they raise
:class:`fdl.compat.NewerRelease`. A command that meets one here reads the release with the
refresh tool's code (:func:`fdl.refresh.learn_release`) into fdl's cache and runs again;
every plan made with it carries "read from its artefacts ... on DATE ... not from fdl's
reviewed tables" (:attr:`fdl.compat.Release.provenance`).

What is read: the release's METADATA first (about 4 MB: PyPI's JSON for torch and a few
ranges of its wheels). The archs of its official build (its ``libtorch_cuda.so``, about
360 MB streamed) only when a plan checks GPUs against them (a real run, not ``--dry-run``),
once per cache. Offline, the refusal stays (exit 5), bounded by fdl's network timeouts.
"""

from __future__ import annotations

from fdl.errors import ManifestError, NetworkError, UsageError

# Every command but the fast ones passes through here: nothing is imported for it until
# a command meets a newer release (start-up time, bench/cli_latency.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable, Mapping

    from fdl.cli._console import Console
    from fdl.compat import NewerRelease
    from fdl.libtorch import UnseenFramework

__all__ = ["PYPI_ENV", "pypi_url", "with_learning"]

PYPI_ENV = "FDL_PYPI_URL"
PYPI = "https://pypi.org/pypi"


def pypi_url(environ: Mapping[str, str]) -> str:
    """PyPI's JSON API: ``$FDL_PYPI_URL`` (a mirror, a test's server), else pypi.org's."""
    return (environ.get(PYPI_ENV) or PYPI).rstrip("/")


def with_learning(
    run: Callable[[], int],
    console: Console,
    *,
    pypi: str,
    dry_run: bool,
    today: Callable[[], datetime.date] | None = None,
) -> int:
    """``run()``; when it meets a release newer than the tables, read what it lacks and run
    it again (each release's METADATA and archs at most once an invocation).

    Raises:
        NewerRelease: a dry run needs the archs (it does not stream 360 MB).
        NetworkError: PyPI cannot be read (the refusal, exit 5).
        UsageError: PyPI has no such release.
    """
    tried: set[tuple[str, bool]] = set()
    while True:
        try:
            return run()
        except ManifestError as error:
            if type(error).__name__ != "UnseenFramework":
                raise
            from fdl.libtorch import UnseenFramework

            if not isinstance(error, UnseenFramework):
                raise
            if (error.framework, False) in tried:
                raise
            tried.add((error.framework, False))
            _fetch_crates(console, error)
        except UsageError as error:
            from fdl.compat import NewerRelease  # loaded already when one was raised

            if not isinstance(error, NewerRelease):
                raise
            step = (error.version, error.archs)
            if step in tried:
                raise
            if error.archs and dry_run:
                raise _dry_run_refusal(error) from None
            tried.add(step)
            if today is None:
                import datetime

                today = datetime.date.today
            _learn(console, error, pypi=pypi, today=today().isoformat())


def _dry_run_refusal(error: NewerRelease) -> UsageError:
    return UsageError(
        f"{error.message}; a dry run does not stream them (the libtorch_cuda.so of its "
        "wheel, about 360 MB)",
        hint=(
            "run the command without --dry-run (it reads them once, into fdl's cache), or "
            f"first: python -m fdl.refresh learn {error.version}"
        ),
    )


def _learn(console: Console, error: NewerRelease, *, pypi: str, today: str) -> None:
    """Read ``error.version`` from PyPI into fdl's cache, saying what is read on stderr."""
    from fdl.cli._progress import ProgressLine, human_bytes
    from fdl.compat import releases
    from fdl.net import read_range
    from fdl.refresh import learn_release

    version = error.version
    newest = releases()[-1].latest
    if error.archs:
        console.info(
            f"fdl: {error.message}: streaming them from its wheel on PyPI (about 360 MB, "
            "once: kept in fdl's cache)"
        )
    else:
        console.info(
            f"fdl: torch {version} is newer than fdl's reviewed tables (they end at {newest}): "
            f"reading its facts from its wheels' METADATA on PyPI ({pypi})"
        )
    progress = ProgressLine(console, f"reading torch {version}", interval=10.0)
    seen = [""]

    def shown(what: str, done: int) -> None:
        if what != seen[0]:
            seen[0] = what
            progress.message(f"  reading {what}")
        if done:
            progress.bytes(done, None)

    try:
        learned = learn_release(
            version,
            read_range,
            today=today,
            pypi=pypi,
            device_code=error.archs,
            read_by="fdl at run time",
            on_read=shown,
        )
    except NetworkError as exc:
        raise NetworkError(
            f"torch {version} is newer than fdl's compatibility tables (they end at "
            f"{newest}) and its facts cannot be read from PyPI: {exc.message}",
            hint=(
                f"use --torch {newest}, or run again when {pypi} answers (the release is "
                "read once, into fdl's cache)"
            ),
        ) from None
    finally:
        progress.close()
    console.info(
        f"  read {human_bytes(learned.bytes_read)} in {learned.seconds} s; kept in "
        f"{learned.path}: planning with facts read from its artefacts, not from fdl's "
        "reviewed tables"
    )


def _fetch_crates(console: Console, error: UnseenFramework) -> None:
    """Have cargo download the crates that state a framework release the tables lack (the
    next plan reads them from cargo's cache)."""
    from fdl.errors import CommandFailed, EnvironmentProblem
    from fdl.libtorch import CrateSourceError, fetch_framework_crates

    console.info(
        f"fdl: {error.message}: fetching it through cargo (the project's cargo "
        "configuration, mirrors and offline mode apply)"
    )
    way_out = (
        "run again when cargo's registry answers; "
        "offline, set libtorch.torch in fdl.yml (the torch the release needs) with "
        "libtorch.framework-check: false"
    )
    try:
        fetch_framework_crates(error.framework, error.version, error.directory)
    except CommandFailed as exc:
        tail = (exc.details or "").strip().splitlines()[-3:]
        raise NetworkError(
            f"{error.location}: {error.message}, and cargo could not fetch it: "
            + (" / ".join(line.strip() for line in tail)[:600] or exc.message),
            hint=way_out,
        ) from None
    except (EnvironmentProblem, CrateSourceError) as exc:
        raise EnvironmentProblem(
            f"{error.location}: {error.message}, and {exc.message}",
            hint=f"{exc.hint}; or {way_out}" if exc.hint else way_out,
        ) from None
