"""Which torch a framework release fdl's tables lack compiles against, read from the
release's own crates at run time and kept in fdl's cache.

tch-rs: torch-sys's ``build.rs`` (``const TORCH_VERSION: &str = "..."`` and its
``-std=c++NN``). floDl: the libtorch release floDl itself states, in flodl-cli of the same
release (``src/libtorch/download.rs`` and ``build.rs`` ``const LIBTORCH_VERSION``, the
scaffold's ``ARG LIBTORCH_VERSION=`` in ``src/init.rs``: they must agree), and flodl-sys's
``build.rs`` ``.std("c++NN")``. Each fact names its file and line.

The facts are kept in ``<cache>/compat/frameworks/<framework>-<version>.json`` and read
from there afterwards; an entry that is damaged, of another format or for another release
is a miss (the crate is read again).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.errors import Location, ManifestError, UsageError
from fdl.libtorch._crate_source import (
    CRATE_VERSION,
    CrateFiles,
    CrateSourceError,
    cargo_home,
    read_crate_files,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.compat import FrameworkRelease, UnknownFrameworkRelease

__all__ = [
    "CrateFactError",
    "FrameworkReading",
    "UnseenFramework",
    "crates_to_read",
    "facts_from_texts",
    "fetch_framework_crates",
    "files_to_read",
    "learned_path",
    "read_framework_release",
    "release_from_crates",
]

FORMAT = 1
TORCH = re.compile(r"[1-9][0-9]?\.(0|[1-9][0-9]?)\.(0|[1-9][0-9]?)")
_STANDARDS = (11, 14, 17, 20, 23, 26)
# What each framework release states, file by file: (crate, file, what, pattern).
_TORCH_CONST = (
    r"(?m)^[ \t]*(?:pub(?:\([a-z]+\))?[ \t]+)?const[ \t]+{name}[ \t]*:[ \t]*"
    r'&(?:\'static[ \t]+)?str[ \t]*=[ \t]*"([^"\n]{{0,64}})"'
)
_FACTS: Mapping[str, tuple[tuple[str, str, str, str], ...]] = {
    "tch": (
        ("torch-sys", "build.rs", "torch", _TORCH_CONST.format(name="TORCH_VERSION")),
        ("torch-sys", "build.rs", "cxx", r'"-std=c\+\+([0-9]{2,3})"'),
    ),
    "flodl": (
        (
            "flodl-cli",
            "src/libtorch/download.rs",
            "torch",
            _TORCH_CONST.format(name="LIBTORCH_VERSION"),
        ),
        (
            "flodl-cli",
            "src/libtorch/build.rs",
            "torch",
            _TORCH_CONST.format(name="LIBTORCH_VERSION"),
        ),
        (
            "flodl-cli",
            "src/init.rs",
            "torch",
            r"(?m)^ARG[ \t]+LIBTORCH_VERSION=([^\s]{0,64})(?=\s|$)",
        ),
        ("flodl-sys", "build.rs", "cxx", r'\.std\([ \t]*"c\+\+([0-9]{2,3})"[ \t]*\)'),
    ),
}
_LABELS = {"torch": "the libtorch release", "cxx": "the C++ standard"}


class CrateFactError(UsageError):
    """A framework release's crates do not state what fdl reads from them."""


@dataclass(frozen=True)
class FrameworkReading:
    """A framework release's facts and what obtaining them cost.

    Attributes:
        row: The release as a table row (its ``source`` says it was read at run time).
        cached: True when read from fdl's cache (no crate was opened).
        bytes_read: Bytes read from cargo's cache (or from fdl's cache entry).
        seconds: How long it took.
        path: fdl's cache entry.
    """

    row: FrameworkRelease
    cached: bool
    bytes_read: int
    seconds: float
    path: Path


def crates_to_read(framework: str, version: str) -> tuple[tuple[str, str], ...]:
    """The (crate, version) pairs whose files state ``framework`` ``version``'s facts."""
    return tuple(dict.fromkeys((crate, version) for crate, *_ in _FACTS[framework]))


def files_to_read(framework: str) -> dict[str, list[str]]:
    """Each crate whose files state ``framework``'s facts, and those files."""
    found: dict[str, list[str]] = {}
    for crate, name, *_ in _FACTS[framework]:
        found.setdefault(crate, [])
        if name not in found[crate]:
            found[crate].append(name)
    return found


def facts_from_texts(
    framework: str, title: str, version: str, texts: Mapping[str, Mapping[str, str]]
) -> tuple[str, int, list[str]]:
    """(torch, C++ standard, the facts as ``crate file:line ...``) that ``texts`` (crate ->
    file -> text) state for ``framework`` ``version``.

    Raises:
        CrateFactError: a fact is not stated, stated differently twice, or not a value of
            its grammar.
    """
    return _facts(framework, title, version, texts)


READ_AT_RUN_TIME = "read by fdl at run time"


def facts_read(source: str) -> str | None:
    """The facts of a row read at run time (``torch-sys build.rs:13 TORCH_VERSION
    "2.13.0"; torch-sys build.rs:385 c++17``), from its ``source``; None for a table row."""
    if not source.startswith(READ_AT_RUN_TIME) or "): " not in source:
        return None
    return source.rsplit("): ", 1)[1].split(" (kept in fdl's cache on ", maxsplit=1)[0]


def learned_path(framework: str, version: str) -> Path:
    """Where fdl's cache keeps ``framework`` ``version``'s facts read from its crates."""
    from fdl.paths import cache_dir

    return cache_dir() / "compat" / "frameworks" / f"{framework}-{version}.json"


def read_framework_release(
    framework: str,
    title: str,
    version: str,
    *,
    home: Path | None = None,
    today: str | None = None,
) -> FrameworkReading | None:
    """``framework`` ``version``'s facts: from fdl's cache, else from its crates in cargo's
    registry cache (then kept); None when cargo holds no copy of a crate needed.

    Raises:
        CrateSourceError: cargo's copy is damaged or hostile.
        CrateFactError: the crates do not state the facts, state them twice differently, or
            state a value outside the grammar.
    """
    if framework not in _FACTS or not CRATE_VERSION.fullmatch(version):
        return None
    started = time.monotonic()
    path = learned_path(framework, version)
    cached = _kept(path, framework, title, version)
    if cached is not None:
        row, size = cached
        return FrameworkReading(row, True, size, round(time.monotonic() - started, 4), path)
    home = cargo_home() if home is None else home
    files: dict[str, CrateFiles] = {}
    for crate, names in files_to_read(framework).items():
        found = read_crate_files(crate, version, names, home)
        if found is None:
            return None
        files[crate] = found
    texts = {crate: found.texts for crate, found in files.items()}
    torch, cxx, facts = _facts(framework, title, version, texts)
    where = ", ".join(sorted({str(f.where) for f in files.values()}))
    source = (
        f"{READ_AT_RUN_TIME} from crate{'s' if len(files) > 1 else ''} "
        f"{' and '.join(f'{c} {version}' for c in files)} ({where}): {'; '.join(facts)}"
    )
    from fdl.compat import FrameworkRelease

    row = FrameworkRelease(framework, title, version, torch, cxx, source)
    if today is None:
        import datetime

        today = datetime.date.today().isoformat()
    _keep(path, row, where, today)
    spent = round(time.monotonic() - started, 4)
    return FrameworkReading(row, False, sum(f.bytes_read for f in files.values()), spent, path)


def _facts(
    framework: str, title: str, version: str, texts: Mapping[str, Mapping[str, str]]
) -> tuple[str, int, list[str]]:
    found: dict[str, list[tuple[str, str]]] = {"torch": [], "cxx": []}
    for crate, name, what, pattern in _FACTS[framework]:
        text = texts.get(crate, {}).get(name)
        if text is None:
            continue
        # every statement in the file: the scaffold's three Dockerfiles must agree too
        matches = list(itertools.islice(re.finditer(pattern, text), 16))
        lines = "/".join(str(text.count("\n", 0, m.start(1)) + 1) for m in matches)
        for value in dict.fromkeys(m.group(1) for m in matches):
            at = (
                lines if len({m.group(1) for m in matches}) == 1 else _line_of(text, matches, value)
            )
            found[what].append((value, f"{crate} {name}:{at}"))
    way_out = (
        f"set libtorch.torch to the torch {title} {version} needs and "
        "libtorch.framework-check: false in fdl.yml (fdl --set libtorch.torch=2.10.0 "
        "--set libtorch.framework-check=false ...), or use a newer fdl"
    )
    values: dict[str, str] = {}
    for what, hits in found.items():
        if not hits:
            files_read = ", ".join(f"{c} {n}" for c, n, w, _ in _FACTS[framework] if w == what)
            raise CrateFactError(
                f"{title} {version}'s crates do not state {_LABELS[what]} fdl reads "
                f"(looked in {files_read})",
                hint=way_out,
            )
        distinct = {value for value, _ in hits}
        if len(distinct) > 1:
            raise CrateFactError(
                f"{title} {version}'s crates state {_LABELS[what]} differently: "
                + ", ".join(f"{value[:64]!r} at {at}" for value, at in hits),
                hint=way_out,
            )
        value = hits[0][0]
        good = TORCH.fullmatch(value) if what == "torch" else int(value) in _STANDARDS
        if not good:
            raise CrateFactError(
                f"{title} {version}: {hits[0][1]} states {_LABELS[what]} as {value[:64]!r}, "
                "which is not one",
                hint=way_out,
            )
        values[what] = value
    facts = [
        f'{at} {"LIBTORCH" if framework == "flodl" else "TORCH"}_VERSION "{values["torch"]}"'
        for _, at in found["torch"]
    ]
    facts += [f"{at} c++{values['cxx']}" for _, at in found["cxx"]]
    return values["torch"], int(values["cxx"]), facts


def _line_of(text: str, matches: list[re.Match[str]], value: str) -> str:
    first = next(m for m in matches if m.group(1) == value)
    return str(text.count("\n", 0, first.start(1)) + 1)


def _kept(
    path: Path, framework: str, title: str, version: str
) -> tuple[FrameworkRelease, int] | None:
    """The entry at ``path``; None when absent, damaged or not this release's."""
    from fdl._files import read_small_text
    from fdl.compat import FrameworkRelease

    try:
        text = read_small_text(path, limit=64 << 10)
        entry = json.loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or text is None:
        return None
    torch, cxx, source = entry.get("torch"), entry.get("cxx_standard"), entry.get("source")
    if (
        entry.get("format") != FORMAT
        or entry.get("framework") != framework
        or entry.get("version") != version
        or not isinstance(torch, str)
        or not TORCH.fullmatch(torch)
        or cxx not in _STANDARDS
        or not isinstance(source, str)
        or len(source) > 4096
        or any(ord(c) < 32 for c in source)
    ):
        return None
    read_on = str(entry.get("read_on", ""))[:10]
    return FrameworkRelease(
        framework, title, version, torch, int(cxx), f"{source} (kept in fdl's cache on {read_on})"
    ), len(text)


def _keep(path: Path, row: FrameworkRelease, where: str, today: str) -> None:
    from fdl._files import atomic_write_text
    from fdl.paths import is_own_cache, own_cache_dir

    entry = {
        "format": FORMAT,
        "framework": row.framework,
        "version": row.version,
        "torch": row.torch,
        "cxx_standard": row.cxx_standard,
        "source": row.source,
        "read_from": where,
        "read_on": today,
        "read_by": "fdl at run time",
    }
    try:
        own_cache_dir(path.parent.parent)
        own_cache_dir(path.parent)
        if path.parent.is_symlink() or not is_own_cache(path.parent):
            return  # not a directory fdl made: read the crate again next time
        atomic_write_text(path, json.dumps(entry, indent=2) + "\n")
    except OSError:
        return  # an unwritable cache only means reading the crate again


def fetch_framework_crates(framework: str, version: str, project: Path) -> None:
    """Have cargo download the crates that state ``framework`` ``version``'s facts (run
    from ``project``: its cargo configuration applies), for :func:`read_framework_release`.

    Raises:
        EnvironmentProblem: cargo is not installed.
        CommandFailed: cargo could not fetch them (offline, no such release).
    """
    import os

    from fdl.libtorch._crate_source import fetch_crates
    from fdl.paths import cache_dir

    scratch = cache_dir() / "compat" / "frameworks" / f".fetch-{os.getpid()}"
    fetch_crates(crates_to_read(framework, version), project=project, scratch=scratch)


def release_from_crates(
    unknown: UnknownFrameworkRelease,
    version: str,
    location: Location,
    directory: Path,
    check_key: str,
) -> FrameworkRelease:
    """The row of a release Cargo.lock names (at ``location``) that the tables lack
    (``unknown``), read from its crates in cargo's cache (or fdl's cache).

    Raises:
        ManifestError: the release is not one Rust's registry writes, or its crates are
            damaged, hostile or do not state the facts.
        UnseenFramework: cargo holds no copy of its crates (a command fetches them).
    """
    from fdl.compat import framework

    name = unknown.newest.framework
    way_out = f"set libtorch.torch in fdl.yml with {check_key}: false"
    if not CRATE_VERSION.fullmatch(version):
        raise ManifestError(
            unknown.message, location=location, hint=f"{unknown.hint}; or {way_out}"
        )
    title = framework(name).title
    try:
        reading = read_framework_release(name, title, version)
    except (CrateSourceError, CrateFactError) as exc:
        raise ManifestError(
            f"{title} {version} is not in fdl's tables, and its crates cannot be read: "
            f"{exc.message}",
            location=location,
            hint=f"{exc.hint}; or {way_out}",
        ) from None
    if reading is not None:
        return reading.row
    raise UnseenFramework(
        f"{unknown.message}, and cargo's registry cache holds no copy of "
        f"{' and '.join(f'{c} {v}' for c, v in crates_to_read(name, version))} to read "
        "which torch it needs",
        location=location,
        hint="`fdl setup --dry-run` fetches it through cargo"
        + (" (as does `cargo fetch` in the project)" if name == "tch" else "")
        + f"; offline, {way_out}; {unknown.hint}",
        framework=name,
        version=version,
        directory=directory,
    )


class UnseenFramework(ManifestError):
    """A framework release the tables lack whose crates cargo has not downloaded: a command
    may fetch them through cargo (:func:`fetch_framework_crates`) and plan again."""

    def __init__(
        self,
        message: str,
        *,
        location: Location,
        hint: str,
        framework: str,
        version: str,
        directory: Path,
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.framework = framework
        self.version = version
        self.directory = directory
