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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.errors import NetworkError
from fdl.net._deadline import net_deadline

__all__ = ["Manifest", "RegistryClient", "RegistryError", "registry_url"]

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
                    hint="check the registry address in the deploy target and that it is up",
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
            hint="check that the registry supports OCI image manifests, or push with "
            "`compression: gzip` in the deploy target",
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
