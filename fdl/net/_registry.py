"""A small client of the registry HTTP API (OCI distribution spec v1.1 / docker registry v2):
what pushing an image blob by blob needs, and reading manifests and blobs back.

Authentication answers the registry's ``WWW-Authenticate`` challenge: ``Basic`` with the
credentials given, or ``Bearer`` with a token fetched from the challenge's realm (with
those credentials, or anonymously). Loopback registries (``localhost``, 127.0.0.0/8,
``::1``) are spoken to over plain HTTP, as docker does; every other one over HTTPS.

A registry is remote input. Credentials (and the token they buy) go only to the
registry's own host[:port]: a tags ``Link`` or an upload ``Location`` on another host is
followed without them, and a Bearer realm on another host gets them only when the docker
config holds credentials for that host too (the user logged in there). Every exchange but
a blob's body ends within ``$FDL_NET_DEADLINE`` seconds in all (a server that trickles its
headers or body a byte at a time included), every body is read up to a bound
(:mod:`fdl.net._limits`), tags and digests follow the OCI grammar before they reach a
URL, and the registry's text is made printable before it reaches a message.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from fdl._text import printable
from fdl.errors import NetworkError
from fdl.net._deadline import DEADLINE_ENV, net_deadline
from fdl.net._limits import MAX_BODY, MAX_PAGES
from fdl.net._names import (
    TOKEN_SERVICES,
    is_digest,
    is_loopback,
    is_tag,
    next_page,
    origin,
    read_json,
    registry_url,
)
from fdl.net._watch import DeadlineExceeded, TooLarge, deadline, read_body, watched_session

__all__ = ["BlobFetch", "Manifest", "RegistryClient", "RegistryError"]

_CHUNK = 1 << 20
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
# An upload gets the deadline plus one second for each of these many bytes.
_UPLOAD_RATE = 64 << 10
# A blob's body slower than this (bytes a second) over the deadline is cut.
_MIN_RATE = 1 << 10
_NOT_JSON = object()


class RegistryError(NetworkError):
    """The registry refused a request (``status``: its HTTP status; ``code``: the first
    error code of its answer, such as ``MANIFEST_INVALID``)."""

    def __init__(self, message: str, *, status: int, code: str = "", hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Manifest:
    """A manifest as the registry serves it."""

    body: bytes
    media_type: str
    digest: str


@dataclass(frozen=True)
class BlobFetch:
    """A blob fetched to disk: where, and how many of its bytes were already there (a
    resumed download) or came over the network."""

    path: Path
    resumed: int
    received: int


class RegistryClient:
    """One repository of one registry.

    Args:
        host: ``host[:port]``.
        repository: ``namespace/name``.
        credentials: (user, secret) from the docker config, or None (anonymous).
        base_url: Overrides :func:`registry_url` (tests).
        trusts: Whether the user holds credentials for another host (a Bearer realm
            there gets the registry's credentials only then); default: no other host.
    """

    def __init__(
        self,
        host: str,
        repository: str,
        *,
        credentials: tuple[str, str] | None = None,
        base_url: str | None = None,
        trusts: Callable[[str], bool] | None = None,
    ) -> None:
        self.host = host
        self.repository = repository
        self._credentials = credentials
        self._base = (base_url or registry_url(host)).rstrip("/")
        self._origin = origin(self._base)
        self._trusts = trusts or (lambda _host: False)
        self._session = watched_session()
        self._session.headers["Accept-Encoding"] = "identity"
        self._auth: str | None = None

    # -- plumbing -------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self._base}/v2/{self.repository}/{path}"

    @contextmanager
    def _exchange(self, what: str, seconds: float | None = None) -> Iterator[None]:
        """One exchange with the registry, within the deadline; its failures as
        NetworkError (exit 5) saying what and how to go on."""
        import requests
        import urllib3

        limit = seconds or net_deadline()
        try:
            with deadline(limit):
                yield
        except DeadlineExceeded:
            raise NetworkError(
                f"the registry {self.host} did not finish {what} within {limit:g} s",
                hint=f"check that {self.host} is a registry and is up; to wait longer for a "
                f"slow one, set {DEADLINE_ENV}=SECONDS (now {limit:g})",
            ) from None
        except TooLarge as exc:
            raise RegistryError(
                f"the registry {self.host} answered {what} with {exc}",
                status=0,
                hint=MAX_BODY.hint(MAX_BODY.value()),
            ) from None
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise NetworkError(
                f"cannot reach the registry {self.host} ({what}): "
                f"{type(exc).__name__}: {printable(str(exc), 200)}",
                hint=f"check the address {self.host} (a deploy target's registry, libtorch.registry, "
                "--to or --registry) and that the registry is up",
            ) from None

    def _send(self, method: str, url: str, **kwargs: Any) -> Any:
        """The response (its body not read) of ``method url``, answering a 401 from the
        registry once. Call within :meth:`_exchange`."""
        headers = dict(kwargs.pop("headers", None) or {})
        ours = origin(url) == self._origin
        for attempt in range(2):
            if self._auth and ours:
                headers["Authorization"] = self._auth
            answer = self._session.request(
                method,
                url,
                headers=headers,
                timeout=min(300.0, net_deadline()),
                stream=True,
                allow_redirects=method in ("GET", "HEAD"),
                **kwargs,
            )
            answer.raw.decode_content = True
            if answer.status_code == 401 and attempt == 0 and ours:
                challenge = answer.headers.get("WWW-Authenticate", "")
                answer.close()
                self._authenticate(challenge)
                seek = getattr(kwargs.get("data"), "seek", None)
                if seek is not None:
                    seek(0)
                continue
            return answer
        return answer

    def _call(self, method: str, url: str, what: str, **kwargs: Any) -> tuple[Any, bytes]:
        """The response and its whole body (at most ``$FDL_REGISTRY_MAX_BODY`` bytes),
        within the deadline."""
        seconds = kwargs.pop("seconds", None)
        with self._exchange(what, seconds):
            answer = self._send(method, url, **kwargs)
            body = b"" if method == "HEAD" else read_body(answer, MAX_BODY.value())
        return answer, body

    def _authenticate(self, challenge: str) -> None:
        import base64

        scheme, _, rest = challenge.partition(" ")
        if scheme.lower() == "basic":
            if self._credentials is None:
                raise self._denied()
            user, secret = self._credentials
            self._auth = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
            return
        if scheme.lower() != "bearer":
            raise self._denied()
        fields = dict(_CHALLENGE.findall(rest))
        realm = fields.get("realm", "")
        try:
            parts = urlsplit(realm)
            realm_host = parts.netloc if parts.hostname and parts.port != 0 else ""
        except ValueError:  # a malformed port or IPv6 address
            parts, realm_host = urlsplit(""), ""
        if parts.scheme not in ("http", "https") or not realm_host or "@" in realm_host:
            raise RegistryError(
                f"the registry {self.host} asks for a token from "
                f"{printable(realm, 100)!r}, which is not an http(s) address",
                status=401,
                hint=f"check that {self.host} is the registry meant (its WWW-Authenticate "
                "challenge names no usable token service)",
            )
        if parts.scheme == "http" and not is_loopback(realm_host):
            raise RegistryError(
                f"the registry {self.host} asks for a token over plain HTTP from {realm_host}",
                status=401,
                hint="fdl sends credentials over HTTPS only (or to a loopback address); "
                "check the registry's configuration",
            )
        trusted = (
            realm_host == self._origin
            or TOKEN_SERVICES.get(self._origin) == realm_host.lower()
            or self._trusts(realm_host)
        )
        params = {k: v for k, v in fields.items() if k in ("service", "scope")}
        params.setdefault("scope", f"repository:{self.repository}:pull,push")
        with self._exchange(f"the token request to {realm_host}"):
            answer = self._session.get(
                realm,
                params=params,
                auth=self._credentials if trusted else None,
                timeout=min(60.0, net_deadline()),
                stream=True,
            )
            answer.raw.decode_content = True
            body = read_body(answer, MAX_BODY.value())
        if answer.status_code != 200:
            raise self._denied(realm_host if not trusted and self._credentials else None)
        reply = read_json(body)
        token = reply.get("token") or reply.get("access_token") if isinstance(reply, dict) else None
        if not isinstance(token, str) or not token or not token.isprintable():
            raise RegistryError(
                f"the token service {realm_host} of the registry {self.host} answered "
                "without a token",
                status=401,
                hint=f"check that {self.host} is the registry meant; docker login {self.host}",
            )
        self._auth = f"Bearer {token}"

    def _denied(self, untrusted: str | None = None) -> RegistryError:
        hint = f"docker login {self.host} (fdl reads the docker config's credentials)"
        if untrusted:
            hint = (
                f"its token service is on another host, {untrusted}, which fdl sends the "
                f"credentials of {self.host} only when you logged in there too: "
                f"docker login {untrusted}"
            )
        return RegistryError(
            f"the registry {self.host} refused fdl's credentials for {self.repository}",
            status=401,
            hint=hint,
        )

    def _fail(self, answer: Any, body: bytes, action: str) -> RegistryError:
        code = ""
        message = body[:300].decode("utf-8", "replace")
        found = read_json(body)
        errors = found.get("errors") if isinstance(found, dict) else None
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            code = printable(str(errors[0].get("code", "")), 60)
            message = f"{code}: {errors[0].get('message', '')}"
        return RegistryError(
            f"the registry {self.host} refused {action} (HTTP {answer.status_code}, "
            f"{printable(message)})",
            status=answer.status_code,
            code=code,
            hint="check that the registry supports OCI image manifests, or push gzip layers "
            "(`compression: gzip` in a deploy target, `fdl libtorch push --compression gzip`)",
        )

    def _error_body(self, answer: Any, what: str) -> bytes:
        """The (bounded) body of an answer that is an error, within the deadline."""
        with self._exchange(what):
            return read_body(answer, MAX_BODY.value())

    # -- the API --------------------------------------------------------------------------

    def has_blob(self, digest: str) -> bool:
        """Whether the repository already holds the blob ``digest``."""
        answer, _ = self._call("HEAD", self._blob_url(digest), f"checking the blob {digest}")
        return bool(answer.status_code == 200)

    def upload_blob(self, path: Path, digest: str) -> None:
        """Upload the file ``path`` as the blob ``digest`` (one monolithic PUT)."""
        uploads = self._url("blobs/uploads/")
        self._blob_url(digest)
        started, body = self._call("POST", uploads, f"starting the upload of {digest}")
        if started.status_code not in (201, 202):
            raise self._fail(started, body, f"starting the upload of {digest}")
        location = urljoin(uploads, started.headers.get("Location", ""))
        if not started.headers.get("Location") or urlsplit(location).scheme not in (
            "http",
            "https",
        ):
            raise RegistryError(
                f"the registry {self.host} started the upload of {digest} without an "
                f"http(s) Location ({printable(started.headers.get('Location', ''), 100)!r})",
                status=started.status_code,
                hint=f"check that {self.host} is an OCI registry",
            )
        separator = "&" if "?" in location else "?"
        size = path.stat().st_size
        with path.open("rb") as handle:
            done, body = self._call(
                "PUT",
                f"{location}{separator}digest={digest}",
                f"the upload of {digest}",
                data=handle,
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
                seconds=net_deadline() + size / _UPLOAD_RATE,
            )
        if done.status_code != 201:
            raise self._fail(done, body, f"the blob {digest}")

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> str:
        """Store a manifest under ``reference`` (a tag); its digest as the registry says."""
        what = f"the manifest {self.repository}:{reference}"
        answer, reply = self._call(
            "PUT",
            self._manifest_url(reference),
            what,
            data=body,
            headers={"Content-Type": media_type},
        )
        if answer.status_code != 201:
            raise self._fail(answer, reply, what)
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        served = answer.headers.get("Docker-Content-Digest")
        if served and served != digest:
            raise RegistryError(
                f"the registry {self.host} stored the manifest as {printable(served, 140)}, "
                f"not {digest}",
                status=answer.status_code,
                hint="the registry rewrote the manifest; push with `compression: gzip`",
            )
        return digest

    def manifest(self, reference: str, accept: tuple[str, ...]) -> Manifest:
        """The manifest ``reference`` (tag or digest), in one of the ``accept`` types."""
        what = f"reading the manifest {self.repository}:{reference}"
        answer, body = self._call(
            "GET", self._manifest_url(reference), what, headers={"Accept": ", ".join(accept)}
        )
        if answer.status_code != 200:
            raise self._fail(answer, body, what)
        return Manifest(
            body,
            printable(answer.headers.get("Content-Type", "").split(";")[0], 100),
            "sha256:" + hashlib.sha256(body).hexdigest(),
        )

    def blob(self, digest: str, dest: Path) -> Path:
        """Download the blob ``digest`` to ``dest``, checking its sha256."""
        what = f"reading the blob {digest}"
        url = self._blob_url(digest)
        with self._exchange(what):
            answer = self._send("GET", url)
        if answer.status_code != 200:
            raise self._fail(answer, self._error_body(answer, what), what)
        hasher = hashlib.sha256()
        with dest.open("wb") as handle:
            for chunk in answer.iter_content(_CHUNK):
                hasher.update(chunk)
                handle.write(chunk)
        self._check_digest(digest, hasher.hexdigest())
        return dest

    def tags(self, *, missing_ok: bool = True) -> list[str]:
        """Every tag of the repository (the ``tags/list`` API, following its ``Link`` pages,
        at most ``$FDL_REGISTRY_MAX_PAGES``); none when the repository does not exist yet
        (``missing_ok=False``: a RegistryError with status 404). Names that are not tags by
        the OCI grammar are left out."""
        found: list[str] = []
        url: str | None = self._url("tags/list?n=1000")
        seen: set[str] = set()
        pages = MAX_PAGES.value()
        what = f"listing the tags of {self.repository}"
        while url is not None:
            if url in seen or len(seen) >= pages:
                again = url in seen
                raise RegistryError(
                    f"the registry {self.host} "
                    + (
                        f"sent the tags listing of {self.repository} back to a page already read"
                        if again
                        else f"listed the tags of {self.repository} in more than {pages} pages"
                    ),
                    status=200,
                    hint=f"check that {self.host} is the registry meant"
                    + ("" if again else f"; {MAX_PAGES.hint(pages)}"),
                )
            seen.add(url)
            answer, body = self._call("GET", url, what)
            if answer.status_code == 404 and (missing_ok or found):
                return found
            if answer.status_code != 200:
                raise self._fail(answer, body, what)
            page = read_json(body)
            listed = page.get("tags") if isinstance(page, dict) else _NOT_JSON
            if listed is None:
                listed = []
            if not isinstance(listed, list):
                raise RegistryError(
                    f"the registry {self.host} listed the tags of {self.repository} "
                    "in a form fdl does not read",
                    status=answer.status_code,
                    hint="check that the address names an OCI registry",
                )
            found += [tag for tag in listed if isinstance(tag, str) and is_tag(tag)]
            url = next_page(answer.headers.get("Link", ""), url)
        return found

    def blob_bytes(self, digest: str, limit: int) -> bytes:
        """A small blob (a config) in memory, checked against its digest; refused when it
        is larger than ``limit``."""
        what = f"reading the blob {digest}"
        with self._exchange(what):
            answer = self._send("GET", self._blob_url(digest))
            try:
                data = read_body(answer, limit)
            except TooLarge:
                raise RegistryError(
                    f"the blob {digest} from {self.host} is larger than {limit} bytes",
                    status=200,
                    hint="the image is not what fdl pushed; check the reference",
                ) from None
        if answer.status_code != 200:
            raise self._fail(answer, data, what)
        self._check_digest(digest, hashlib.sha256(data).hexdigest())
        return data

    def _blob_url(self, digest: str) -> str:
        if not is_digest(digest):
            raise RegistryError(
                f"{printable(digest, 140)!r} is not a digest (sha256: and 64 hex digits)",
                status=0,
                hint="the image's manifest is damaged or hostile; push the variant again",
            )
        return self._url(f"blobs/{digest}")

    def _manifest_url(self, reference: str) -> str:
        if not (is_tag(reference) or is_digest(reference)):
            from fdl.errors import UsageError

            raise UsageError(
                f"{printable(reference, 140)!r} is neither a tag ([a-zA-Z0-9_][a-zA-Z0-9._-], "
                "at most 128) nor a sha256 digest",
                hint="name the image by a tag such as 2.10.0-cu129 or by its @sha256:... digest",
            )
        return self._url(f"manifests/{reference}")

    def fetch_blob(
        self,
        digest: str,
        dest: Path,
        *,
        size: int,
        on_bytes: Callable[[int], None] | None = None,
    ) -> BlobFetch:
        """Download the blob ``digest`` (``size`` bytes, as its descriptor says) to ``dest``.

        The bytes go to ``<dest>.part`` first; a ``.part`` left by an interrupted run is
        resumed with an HTTP Range request (the digest names the content, so the bytes
        there are the start of the same blob). More bytes than ``size``, or bytes whose
        sha256 is not the digest, are refused and the ``.part`` removed.
        """
        part = dest.with_name(dest.name + ".part")
        hasher = hashlib.sha256()
        have = 0
        if part.is_file() and 0 < part.stat().st_size <= size:
            with part.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    hasher.update(chunk)
                    have += len(chunk)
        headers = {"Range": f"bytes={have}-"} if have else {}
        url = self._blob_url(digest)
        with self._exchange(f"reading the blob {digest}"):
            answer = self._send("GET", url, headers=headers)
        if have and answer.status_code == 200:
            hasher, have = hashlib.sha256(), 0  # the registry ignored the range
        elif have and answer.status_code == 416 and have == size:
            answer.close()
            answer = None
        elif answer.status_code not in (200, 206):
            body = self._error_body(answer, f"reading the blob {digest}")
            raise self._fail(answer, body, f"reading the blob {digest}")
        elif answer.status_code == 206 and not answer.headers.get("Content-Range", "").startswith(
            f"bytes {have}-"
        ):
            answer.close()
            part.unlink(missing_ok=True)
            raise RegistryError(
                f"the registry {self.host} answered a resumed download of {digest} with "
                f"another range ({printable(answer.headers.get('Content-Range') or '', 100)!r})",
                status=206,
                hint="run the same command again: it starts the blob afresh",
            )
        resumed = have
        if answer is not None:
            have = self._receive(answer, part, have, size, digest, hasher, on_bytes)
        if have != size:
            raise RegistryError(
                f"the blob {digest} from {self.host} ended after {have} of {size} bytes",
                status=206 if resumed else 200,
                hint="run the same command again: it resumes where it stopped",
            )
        try:
            self._check_digest(digest, hasher.hexdigest())
        except RegistryError:
            part.unlink(missing_ok=True)
            raise
        part.replace(dest)
        return BlobFetch(dest, resumed, have - resumed)

    def _receive(
        self,
        answer: Any,
        part: Path,
        have: int,
        size: int,
        digest: str,
        hasher: Any,
        on_bytes: Callable[[int], None] | None,
    ) -> int:
        """Append the answer's body to ``part``; the bytes it now holds. A connection lost
        midway keeps what arrived, for the next run to resume; so does a body slower than
        _MIN_RATE over ``$FDL_NET_DEADLINE`` seconds (a server trickling it a byte at a
        time, which no read timeout ends)."""
        import time

        import requests
        import urllib3

        seconds = net_deadline()
        window, arrived = time.monotonic(), 0
        reader = getattr(answer.raw, "read1", None) or answer.raw.read
        try:
            with part.open("ab" if have else "wb") as handle:
                while chunk := reader(_CHUNK):
                    have += len(chunk)
                    if have > size:
                        answer.close()
                        handle.close()
                        part.unlink(missing_ok=True)
                        raise RegistryError(
                            f"the blob {digest} from {self.host} is larger than the "
                            f"{size} bytes its manifest says",
                            status=answer.status_code,
                            hint="the registry's storage may be damaged; push the variant again",
                        )
                    hasher.update(chunk)
                    handle.write(chunk)
                    if on_bytes is not None:
                        on_bytes(len(chunk))
                    arrived += len(chunk)
                    if time.monotonic() - window >= seconds:
                        if arrived < _MIN_RATE * seconds:
                            answer.close()
                            raise NetworkError(
                                f"the blob {digest} from {self.host} came slower than "
                                f"{_MIN_RATE >> 10} KiB/s for {seconds:g} s ({have:,} of "
                                f"{size:,} bytes kept)",
                                hint="run the same command again: it resumes where it "
                                f"stopped; to give a slow link longer, set {DEADLINE_ENV}"
                                f"=SECONDS (now {seconds:g})",
                            )
                        window, arrived = time.monotonic(), 0
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise NetworkError(
                f"the download of the blob {digest} from {self.host} stopped after "
                f"{have:,} of {size:,} bytes ({type(exc).__name__})",
                hint="run the same command again: it resumes where it stopped",
            ) from None
        return have

    def _check_digest(self, digest: str, sha256: str) -> None:
        if f"sha256:{sha256}" != digest:
            raise RegistryError(
                f"the blob {digest} from {self.host} has another sha256 (sha256:{sha256})",
                status=200,
                hint="the registry's storage is damaged or the blob was tampered with; "
                "push the variant again from a trusted machine",
            )
