"""A small client of the registry HTTP API (OCI distribution spec v1.1 / docker registry v2):
what pushing an image blob by blob needs, and reading manifests and blobs back.

Authentication answers the registry's ``WWW-Authenticate`` challenge: ``Basic`` with the
credentials given, or ``Bearer`` with a token fetched from the challenge's realm (with
those credentials, or anonymously). Loopback registries (``127.0.0.1``, ``localhost``)
are spoken to over plain HTTP, as docker does; every other one over HTTPS.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.errors import NetworkError
from fdl.net._deadline import net_deadline

__all__ = ["BlobFetch", "Manifest", "RegistryClient", "RegistryError", "registry_url"]

_CHUNK = 1 << 20
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


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


def registry_url(host: str) -> str:
    """``http://`` for loopback registries, ``https://`` otherwise."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    loopback = name in ("localhost", "::1", "[::1]") or name.startswith("127.")
    return f"{'http' if loopback else 'https'}://{host}"


class RegistryClient:
    """One repository of one registry.

    Args:
        host: ``host[:port]``.
        repository: ``namespace/name``.
        credentials: (user, secret) from the docker config, or None (anonymous).
        base_url: Overrides :func:`registry_url` (tests).
    """

    def __init__(
        self,
        host: str,
        repository: str,
        *,
        credentials: tuple[str, str] | None = None,
        base_url: str | None = None,
    ) -> None:
        import requests

        self.host = host
        self.repository = repository
        self._credentials = credentials
        self._base = (base_url or registry_url(host)).rstrip("/")
        self._session = requests.Session()
        self._auth: str | None = None

    # -- plumbing -------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self._base}/v2/{self.repository}/{path}"

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        import requests

        headers = dict(kwargs.pop("headers", None) or {})
        for attempt in range(2):
            if self._auth:
                headers["Authorization"] = self._auth
            try:
                answer = self._session.request(
                    method, url, headers=headers, timeout=min(300.0, net_deadline()), **kwargs
                )
            except requests.RequestException as exc:
                raise NetworkError(
                    f"cannot reach the registry {self.host}: {exc}",
                    hint=f"check the address {self.host} (a deploy target's registry, libtorch.registry, "
                    "--to or --registry) and that the registry is up",
                ) from None
            if answer.status_code == 401 and attempt == 0:
                self._authenticate(answer.headers.get("WWW-Authenticate", ""))
                seek = getattr(kwargs.get("data"), "seek", None)
                if seek is not None:
                    seek(0)
                continue
            return answer
        return answer

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
        params = {k: v for k, v in fields.items() if k in ("service", "scope")}
        params.setdefault("scope", f"repository:{self.repository}:pull,push")
        answer = self._session.get(
            fields.get("realm", ""),
            params=params,
            auth=self._credentials,
            timeout=min(60.0, net_deadline()),
        )
        if answer.status_code != 200:
            raise self._denied()
        body = answer.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise self._denied()
        self._auth = f"Bearer {token}"

    def _denied(self) -> RegistryError:
        return RegistryError(
            f"the registry {self.host} refused fdl's credentials for {self.repository}",
            status=401,
            hint=f"docker login {self.host} (fdl reads the docker config's credentials)",
        )

    def _fail(self, answer: Any, action: str) -> RegistryError:
        code = ""
        message = answer.text[:300]
        try:
            errors = answer.json().get("errors") or []
            if errors:
                code = str(errors[0].get("code", ""))
                message = f"{code}: {errors[0].get('message', '')}"
        except ValueError:
            pass
        return RegistryError(
            f"the registry {self.host} refused {action} (HTTP {answer.status_code}, {message})",
            status=answer.status_code,
            code=code,
            hint="check that the registry supports OCI image manifests, or push gzip layers "
            "(`compression: gzip` in a deploy target, `fdl libtorch push --compression gzip`)",
        )

    # -- the API --------------------------------------------------------------------------

    def has_blob(self, digest: str) -> bool:
        """Whether the repository already holds the blob ``digest``."""
        answer = self._request("HEAD", self._url(f"blobs/{digest}"))
        return bool(answer.status_code == 200)

    def upload_blob(self, path: Path, digest: str) -> None:
        """Upload the file ``path`` as the blob ``digest`` (one monolithic PUT)."""
        started = self._request("POST", self._url("blobs/uploads/"))
        if started.status_code not in (201, 202):
            raise self._fail(started, f"starting the upload of {digest}")
        location = started.headers["Location"]
        if location.startswith("/"):
            location = self._base + location
        separator = "&" if "?" in location else "?"
        with path.open("rb") as handle:
            done = self._request(
                "PUT",
                f"{location}{separator}digest={digest}",
                data=handle,
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(path.stat().st_size),
                },
            )
        if done.status_code != 201:
            raise self._fail(done, f"the blob {digest}")

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> str:
        """Store a manifest under ``reference`` (a tag); its digest as the registry says."""
        answer = self._request(
            "PUT",
            self._url(f"manifests/{reference}"),
            data=body,
            headers={"Content-Type": media_type},
        )
        if answer.status_code != 201:
            raise self._fail(answer, f"the manifest {self.repository}:{reference}")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        served = answer.headers.get("Docker-Content-Digest")
        if served and served != digest:
            raise RegistryError(
                f"the registry {self.host} stored the manifest as {served}, not {digest}",
                status=answer.status_code,
                hint="the registry rewrote the manifest; push with `compression: gzip`",
            )
        return digest

    def manifest(self, reference: str, accept: tuple[str, ...]) -> Manifest:
        """The manifest ``reference`` (tag or digest), in one of the ``accept`` types."""
        answer = self._request(
            "GET", self._url(f"manifests/{reference}"), headers={"Accept": ", ".join(accept)}
        )
        if answer.status_code != 200:
            raise self._fail(answer, f"reading the manifest {self.repository}:{reference}")
        body = answer.content
        return Manifest(
            body,
            answer.headers.get("Content-Type", "").split(";")[0],
            "sha256:" + hashlib.sha256(body).hexdigest(),
        )

    def blob(self, digest: str, dest: Path) -> Path:
        """Download the blob ``digest`` to ``dest``, checking its sha256."""
        answer = self._request("GET", self._url(f"blobs/{digest}"), stream=True)
        if answer.status_code != 200:
            raise self._fail(answer, f"reading the blob {digest}")
        hasher = hashlib.sha256()
        with dest.open("wb") as handle:
            for chunk in answer.iter_content(_CHUNK):
                hasher.update(chunk)
                handle.write(chunk)
        if f"sha256:{hasher.hexdigest()}" != digest:
            raise RegistryError(
                f"the blob {digest} from {self.host} has another sha256",
                status=200,
                hint="the registry's storage may be damaged; push the image again",
            )
        return dest

    def tags(self, *, missing_ok: bool = True) -> list[str]:
        """Every tag of the repository (the ``tags/list`` API, following its ``Link`` pages);
        none when the repository does not exist yet (``missing_ok=False``: a RegistryError
        with status 404)."""
        found: list[str] = []
        url: str | None = self._url("tags/list?n=1000")
        for _page in range(1000):
            if url is None:
                break
            answer = self._request("GET", url)
            if answer.status_code == 404 and (missing_ok or found):
                return found
            if answer.status_code != 200:
                raise self._fail(answer, f"listing the tags of {self.repository}")
            try:
                listed = answer.json().get("tags") or []
            except (ValueError, AttributeError):
                listed = None
            if not isinstance(listed, list):
                raise RegistryError(
                    f"the registry {self.host} listed the tags of {self.repository} "
                    "in a form fdl does not read",
                    status=answer.status_code,
                    hint="check that the address names an OCI registry",
                )
            found += [str(tag) for tag in listed]
            url = _next_page(answer.headers.get("Link", ""), self._base)
        return found

    def blob_bytes(self, digest: str, limit: int) -> bytes:
        """A small blob (a config) in memory, checked against its digest; refused when it
        is larger than ``limit``."""
        answer = self._request("GET", self._url(f"blobs/{digest}"), stream=True)
        if answer.status_code != 200:
            raise self._fail(answer, f"reading the blob {digest}")
        data = bytearray()
        for chunk in answer.iter_content(_CHUNK):
            data += chunk
            if len(data) > limit:
                answer.close()
                raise RegistryError(
                    f"the blob {digest} from {self.host} is larger than {limit} bytes",
                    status=200,
                    hint="the image is not what fdl pushed; check the reference",
                )
        self._check_digest(digest, hashlib.sha256(data).hexdigest())
        return bytes(data)

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
        answer = self._request("GET", self._url(f"blobs/{digest}"), stream=True, headers=headers)
        if have and answer.status_code == 200:
            hasher, have = hashlib.sha256(), 0  # the registry ignored the range
        elif have and answer.status_code == 416 and have == size:
            answer.close()
            answer = None
        elif answer.status_code not in (200, 206):
            raise self._fail(answer, f"reading the blob {digest}")
        elif answer.status_code == 206 and not answer.headers.get("Content-Range", "").startswith(
            f"bytes {have}-"
        ):
            answer.close()
            part.unlink(missing_ok=True)
            raise RegistryError(
                f"the registry {self.host} answered a resumed download of {digest} with "
                f"another range ({answer.headers.get('Content-Range')!r})",
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
        midway keeps what arrived, for the next run to resume."""
        import requests

        try:
            with part.open("ab" if have else "wb") as handle:
                for chunk in answer.iter_content(_CHUNK):
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
        except requests.RequestException as exc:
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


def _next_page(link: str, base: str) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (relative to the registry), if any."""
    match = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', link)
    if match is None:
        return None
    target = match.group(1)
    return base + target if target.startswith("/") else target
