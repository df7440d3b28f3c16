"""floDl and tch releases Rust's registry has that ``frameworks.yaml`` lacks, read from the
crates themselves: the sparse index (``https://index.crates.io``: ``config.json``, then one
JSON line per version at ``fl/od/flodl``, ``3/t/tch``, ``to/rc/torch-sys``; yanked versions
skipped) names the releases; each new one's crates (flodl-cli and flodl-sys, or torch-sys)
are downloaded from the index's ``dl`` address and read with the bounded archive reader;
the facts (:func:`fdl.libtorch.facts_from_texts`) become a table row with its source."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fdl._grammar import quoted
from fdl.errors import FdlError, NetworkError
from fdl.refresh._release import ReadRange

__all__ = ["INDEX", "CratesFinding", "CratesRefresh", "index_path", "refresh_frameworks"]

INDEX = "https://index.crates.io"
_RELEASE = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")
MAX_INDEX = 8 << 20  # flodl's index file is a few KiB, tch's about 40 KiB
MAX_CRATE = 32 << 20  # Rust's registry takes crates up to 10 MB
# The crate whose index names each framework's releases (tch's version is torch-sys's).
_RELEASED_AS = {"flodl": "flodl", "tch": "tch"}
# A whole file of the index or of the registry's downloads.
Fetch = Callable[[str, int, int | None], bytes]


@dataclass(frozen=True)
class CratesFinding:
    """One release the table lacks, read (``row``) or not (``error``)."""

    framework: str
    version: str
    torch: str | None = None
    cxx_standard: int | None = None
    source: str = ""
    error: str = ""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class CratesRefresh:
    """The findings, ``frameworks.yaml`` before and after, what it cost."""

    findings: list[CratesFinding] = field(default_factory=list)
    before: str = ""
    after: str = ""
    bytes_read: int = 0


def index_path(name: str) -> str:
    """``name``'s file in the sparse index (``1/a``, ``3/t/tch``, ``fl/od/flodl``)."""
    if len(name) <= 2:
        return f"{len(name)}/{name}"
    if len(name) == 3:
        return f"3/{name[0]}/{name}"
    return f"{name[:2]}/{name[2:4]}/{name}"


def refresh_frameworks(read: ReadRange, text: str, *, index: str, today: str) -> CratesRefresh:
    """Compare ``frameworks.yaml`` (``text``) with Rust's registry at ``index``: every
    final, unyanked release newer than the table's newest row, read from its crates and
    appended as a row.

    Raises:
        NetworkError: the index cannot be read.
    """
    from fdl.compat import framework, version_key

    index = index.rstrip("/")
    done = CratesRefresh(before=text, after=text)

    def counted(url: str, start: int, length: int | None) -> bytes:
        data, _ = read(url, start, length)
        done.bytes_read += len(data)
        return data

    config = _json_document(counted(f"{index}/config.json", 0, 1 << 16), f"{index}/config.json")
    dl = config.get("dl") if isinstance(config, dict) else None
    if not isinstance(dl, str) or not dl.startswith(("https://", "http://")):
        raise NetworkError(
            f"{index}/config.json names no download address (dl)",
            hint="point --crates-index at a sparse registry index (https://index.crates.io)",
        )
    for name in ("flodl", "tch"):
        known = framework(name)
        newest = version_key(known.newest.version)
        listed = set(_versions(counted, index, _RELEASED_AS[name]))
        if name == "tch":  # a tch release is read from the torch-sys of the same version
            listed &= set(_versions(counted, index, "torch-sys"))
        for version in sorted(listed, key=version_key):
            if version_key(version) <= newest:
                continue
            finding = _read_release(counted, dl, name, known.title, version, today)
            done.findings.append(finding)
            if not finding.error:
                done.after = _add_row(done.after, name, finding)
    return done


def _versions(fetch: Fetch, index: str, crate: str) -> Iterator[str]:
    """The final, unyanked versions the index lists for ``crate`` (a line that is not a
    version entry, or a version outside the grammar, is skipped)."""
    from fdl.net import NotFound

    url = f"{index}/{index_path(crate)}"
    try:
        data = fetch(url, 0, MAX_INDEX + 1)  # bounded: a hostile index cannot fill memory
    except NotFound:
        return  # the registry has no such crate: no release of it
    if len(data) > MAX_INDEX:
        raise NetworkError(f"{url} is {len(data)} bytes, more than an index file holds")
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict) or entry.get("name") != crate or entry.get("yanked"):
            continue
        version = entry.get("vers")
        if isinstance(version, str) and _RELEASE.fullmatch(version):
            yield version


def _read_release(
    read: Fetch, dl: str, name: str, title: str, version: str, today: str
) -> CratesFinding:
    from fdl.libtorch import CrateFactError, facts_from_texts, files_to_read

    texts: dict[str, dict[str, str]] = {}
    urls: list[str] = []
    try:
        for crate, names in files_to_read(name).items():
            url = _download_url(dl, crate, version)
            urls.append(url)
            texts[crate] = _crate_texts(read, url, crate, version, names)
        torch, cxx, facts = facts_from_texts(name, title, version, texts)
    except (CrateFactError, FdlError) as exc:
        return CratesFinding(name, version, error=exc.message)
    crates = " and ".join(f"{c} {version}" for c in texts)
    source = (
        f"crate{'s' if len(texts) > 1 else ''} {crates} (Rust's registry, read {today} by "
        f"python -m fdl.refresh): {'; '.join(facts)}"
    )
    return CratesFinding(name, version, torch, cxx, source)


def _download_url(dl: str, crate: str, version: str) -> str:
    markers = ("{crate}", "{version}", "{prefix}", "{lowerprefix}", "{sha256-checksum}")
    if not any(m in dl for m in markers):
        return f"{dl.rstrip('/')}/{crate}/{version}/download"
    prefix = index_path(crate).rsplit("/", 1)[0]
    return (
        dl.replace("{crate}", crate)
        .replace("{version}", version)
        .replace("{prefix}", prefix)
        .replace("{lowerprefix}", prefix.lower())
    )


def _crate_texts(
    fetch: Fetch, url: str, crate: str, version: str, names: list[str]
) -> dict[str, str]:
    from fdl.archive import ArchiveError, read_tar_members

    data = fetch(url, 0, MAX_CRATE + 1)
    if len(data) > MAX_CRATE:
        raise NetworkError(f"{url} is {len(data)} bytes, more than a crate may be")
    base = f"{crate}-{version}"
    with tempfile.TemporaryDirectory(prefix="fdl-crate-") as scratch:
        path = Path(scratch) / f"{base}.crate"
        path.write_bytes(data)
        try:
            members = read_tar_members(path, [f"{base}/{n}" for n in names])
        except ArchiveError as exc:
            raise NetworkError(f"{url}: {exc.message}") from None
    texts: dict[str, str] = {}
    for name in names:
        raw = members.get(f"{base}/{name}")
        if raw is not None:
            texts[name] = raw.decode("utf-8", "replace")
    return texts


def _json_document(data: bytes, url: str) -> object:
    from fdl.net import read_json

    found = read_json(data)
    if found is None:
        raise NetworkError(f"{url} is not JSON", hint="check the index address (--crates-index)")
    return found


def _add_row(text: str, name: str, finding: CratesFinding) -> str:
    """``text`` with ``finding``'s row appended to ``name``'s releases."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == f"  {name}:")
    end = len(lines)
    for index in range(start + 1, len(lines)):
        line = lines[index]
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and len(line) - len(line.lstrip()) <= 2:
            end = index
            break
    while end > start and (
        not lines[end - 1].strip()
        or (lines[end - 1].lstrip().startswith("#") and not lines[end - 1].startswith("      "))
    ):
        end -= 1
    block = [
        f"      - versions: [{_yaml(finding.version)}]\n",
        f"        torch: {_yaml(str(finding.torch))}\n",
        f"        cxx_standard: {finding.cxx_standard}\n",
        f"        source: {_yaml(finding.source)}\n",
    ]
    return "".join(lines[:end] + block + lines[end:])


def _yaml(text: str) -> str:
    return quoted("yaml", text, what="a finding", source="the frameworks table")
