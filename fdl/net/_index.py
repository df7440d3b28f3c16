"""A Python package index's list of a project's files (the "simple" API: PEP 691's JSON,
else PEP 503's HTML), for reading wheels by HTTP Range without pip.

The index is ``--index-url``, else ``$PIP_INDEX_URL``, else PyPI; a ``file://`` index is
a directory with ``<project>/index.html`` pages. File URLs may be relative to the page
(mirrors answer so): they are resolved against it.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

from fdl.errors import NetworkError
from fdl.net._deadline import net_deadline
from fdl.net._transport import (
    Fatal,
    Transient,
    default_user_agent,
    file_url_path,
    open_transport,
)

__all__ = [
    "PYPI_SIMPLE",
    "IndexFile",
    "default_index",
    "file_link",
    "index_files",
    "parse_index_page",
]

PYPI_SIMPLE = "https://pypi.org/simple/"
MAX_PAGE = 32 << 20  # torch's page is ~0.4 MB
_JSON = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{_JSON}, text/html;q=0.1"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NOT_AN_INDEX = (
    "pass the index's simple API (--index-url or $PIP_INDEX_URL, such as "
    "https://pypi.org/simple); if a proxy answered for it, run the same command again"
)


@dataclass(frozen=True)
class IndexFile:
    """One file the index lists for a project."""

    filename: str
    url: str
    sha256: str | None = None
    size: int | None = None
    requires_python: str | None = None
    yanked: bool = False


def default_index(environ: Mapping[str, str] | None = None) -> str:
    """``$PIP_INDEX_URL``, else PyPI's simple index."""
    found = (os.environ if environ is None else environ).get("PIP_INDEX_URL", "").strip()
    return found or PYPI_SIMPLE


def _normalise(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


def index_files(project: str, index_url: str | None = None) -> list[IndexFile]:
    """The files the index lists for ``project``.

    Raises:
        NetworkError: the index cannot be reached, does not know the project, answers
            something that is neither of the simple API's forms, or a page over 32 MiB.
    """
    base = (index_url or default_index()).rstrip("/") + "/"
    url = urljoin(base, _normalise(project) + "/")
    if url.startswith("file:") and file_url_path(url).is_dir():
        url = urljoin(url, "index.html")  # an index on disk, as pip reads one
    deadline = net_deadline()
    transport = open_transport(
        url, user_agent=default_user_agent(), timeout=(min(15.0, deadline), min(60.0, deadline))
    )
    try:
        response = transport.open(url, {"Accept": _ACCEPT})
    except (Transient, Fatal) as exc:
        raise NetworkError(
            f"cannot reach the package index {base}: {exc}",
            hint="check the network or the index (--index-url, $PIP_INDEX_URL)",
        ) from None
    try:
        if response.status == 404:
            raise NetworkError(
                f"the package index {base} has no project {project!r}",
                hint="pass an index that serves it (--index-url)",
            )
        if response.status != 200:
            raise NetworkError(
                f"the package index answered {response.status} for {url}",
                hint="run the same command again; if it answers the same, check the index "
                "(--index-url, $PIP_INDEX_URL)",
            )
        body = bytearray()
        overall = time.monotonic() + deadline  # a drip ends too, not only a silence
        try:
            for chunk in response.chunks(1 << 16):
                body += chunk
                if len(body) > MAX_PAGE:
                    raise NetworkError(
                        f"{url}: a page over {MAX_PAGE >> 20} MiB, not read", hint=_NOT_AN_INDEX
                    )
                if time.monotonic() > overall:
                    raise NetworkError(
                        f"reading {url} took longer than {deadline:g} s ({len(body)} bytes came)",
                        hint="run the same command again; to wait longer, set "
                        "FDL_NET_DEADLINE=SECONDS",
                    )
        except Transient as exc:
            raise NetworkError(
                f"reading {url} broke off: {exc}", hint="run the same command again"
            ) from None
        kind = str(response.header("Content-Type") or "")
        page = getattr(response, "url", url) or url
    finally:
        response.close()
        transport.close()
    return parse_index_page(bytes(body), kind, page)


def parse_index_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503).

    Raises:
        NetworkError: the page is neither.
    """
    text = body.decode("utf-8", "replace")
    if _JSON in content_type or text.lstrip().startswith("{"):
        return _from_json(text, page_url)
    parser = _Anchors()
    parser.feed(text)
    if not parser.files and "<a" not in text.lower():
        raise NetworkError(f"{page_url} is not a package index page", hint=_NOT_AN_INDEX)
    return [
        IndexFile(f.filename, link, f.sha256, None, f.requires_python, f.yanked)
        for f in parser.files
        if (link := file_link(page_url, f.url)) is not None
    ]


def file_link(page_url: str, url: str) -> str | None:
    """Where a page's file link points, or None for a link fdl does not follow: one that
    is no URL (a broken bracketed host), another scheme than the page's (a remote page
    naming ``file://`` never makes fdl read this machine's files; ``ftp://``), or one
    longer than any index writes. The rule for every link an index page gives."""
    if len(url) > 8192:
        return None
    try:
        link = urljoin(page_url, url)
        scheme, page_scheme = urlsplit(link).scheme.lower(), urlsplit(page_url).scheme.lower()
        urlsplit(link).port  # noqa: B018 (a port that is no number raises here)
    except ValueError:
        return None
    if page_scheme == "file":
        return link if scheme in ("file", "http", "https") else None
    return link if scheme in ("http", "https") else None


def _from_json(text: str, page_url: str) -> list[IndexFile]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise NetworkError(f"{page_url}: a JSON answer without a list of files", hint=_NOT_AN_INDEX)
    found = []
    for item in files:
        if not isinstance(item, dict):
            continue
        name, url = item.get("filename"), item.get("url")
        if not isinstance(name, str) or not isinstance(url, str):
            continue
        link = file_link(page_url, url)
        if link is None:
            continue
        hashes = item.get("hashes")
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        size = item.get("size")
        python = item.get("requires-python")
        found.append(
            IndexFile(
                name,
                link,
                digest if isinstance(digest, str) and _HEX64.fullmatch(digest) else None,
                size if isinstance(size, int) and size >= 0 else None,
                python if isinstance(python, str) else None,
                bool(item.get("yanked")),
            )
        )
    return found


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[IndexFile] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != "a" or self._open is None:
            return
        href = self._open.get("href") or ""
        url, fragment = urldefrag(href)
        digest = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        name = "".join(self._text).strip() or url.rsplit("/", 1)[-1]
        self.files.append(
            IndexFile(
                name,
                url,
                digest if digest and _HEX64.fullmatch(digest) else None,
                None,
                self._open.get("data-requires-python"),
                "data-yanked" in self._open,
            )
        )
        self._open = None
