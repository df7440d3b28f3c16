"""Names in the registry API, read by their grammar: tags and digests (the OCI
distribution spec's), loopback hosts (by address, not by prefix), the origin a URL is
for, the next page of a listing, and JSON that may be hostile."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

__all__ = [
    "TOKEN_SERVICES",
    "is_digest",
    "is_loopback",
    "is_tag",
    "next_page",
    "origin",
    "read_json",
    "registry_url",
]

# The OCI distribution spec's grammar of a tag, and the digests fdl reads.
_TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")
# Registries whose token service is on another host, as their challenge names it: the
# registry's credentials go there as to the registry itself. Sources: Docker Hub's
# challenge (https://docs.docker.com/reference/api/registry/auth/: realm
# https://auth.docker.io/token), GitLab.com's (https://docs.gitlab.com/administration/
# packages/container_registry/: realm https://gitlab.com/jwt/auth).
TOKEN_SERVICES = {
    "registry-1.docker.io": "auth.docker.io",
    "index.docker.io": "auth.docker.io",
    "docker.io": "auth.docker.io",
    "registry.gitlab.com": "gitlab.com",
}


def is_tag(text: str) -> bool:
    """Whether ``text`` is a tag by the OCI grammar (``[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}``)."""
    return _TAG.fullmatch(text) is not None


def is_digest(text: str) -> bool:
    """Whether ``text`` is a ``sha256:`` (64 hex) or ``sha512:`` (128 hex) digest."""
    return _DIGEST.fullmatch(text) is not None


def read_json(data: bytes) -> Any:
    """The JSON document ``data``, or None when it is not one: malformed, not UTF-8, or
    nested deeper than the parser goes (RecursionError)."""
    import json

    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def is_loopback(host: str) -> bool:
    """``localhost``, or an address in 127.0.0.0/8 or ``::1`` (with or without a port);
    ``127.example.com`` is not."""
    import ipaddress

    name = host
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def registry_url(host: str) -> str:
    """``http://`` for loopback registries, ``https://`` otherwise."""
    return f"{'http' if is_loopback(host) else 'https'}://{host}"


def next_page(link: str, page: str) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (relative to ``page``), if any."""
    match = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', link[:4096])
    if match is None:
        return None
    try:  # a broken bracketed host ("http://[x") or port is no next page (was exit 70)
        target = urljoin(page, match.group(1))
        scheme = urlsplit(target).scheme
        urlsplit(target).port  # noqa: B018 (raises on a port that is no number)
    except ValueError:
        return None
    return target if scheme in ("http", "https") else None


def origin(url: str) -> str:
    """``host[:port]`` of a URL (no user info), lower case; "" when it has none."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ""
    return netloc.rpartition("@")[2].lower()
