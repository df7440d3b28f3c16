"""The team's registry as a source: a pushed variant that fits this machine.

:func:`find_shared` lists the repository's tags and reads the manifests of those of the
wanted torch release (annotations only, never a layer): the first whose code runs on every
GPU asked for (cubins or PTX, judged by :func:`fdl.compat.runs_on`), whose CUDA the driver
runs and whose platform is this machine's is the match: the fact the chooser's
``registry`` offer reads (:mod:`fdl.libtorch._choose`) for ``fdl setup``, ``fdl libtorch
install --from-registry`` and ``build``.
The release itself is chosen before (``fdl setup``'s selection, the build's plan): this
module only looks for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fdl.compat import Capability, Verdict, check_driver, parse_archs, runs_on
from fdl.errors import UsageError
from fdl.libtorch.sources._oci import Described, VariantMismatch
from fdl.libtorch.sources._registry import (
    ClientFactory,
    Credentials,
    Reference,
    RemoteVariant,
    default_client,
    default_name,
    parse_reference,
    read_remote,
)
from fdl.net import RegistryError

__all__ = ["RepositoryNotFound", "SharedMatch", "find_shared", "oci_platform"]

# How many manifests one lookup reads at most (tags of the wanted release, newest first).
MAX_MANIFESTS = 64


def oci_platform(platform: str) -> str:
    """``linux-x86_64`` (fdl's platform names) -> ``linux/amd64`` (OCI's)."""
    system, _, machine = platform.partition("-")
    return f"{system}/{ {'x86_64': 'amd64', 'aarch64': 'arm64'}.get(machine, machine) }"


@dataclass(frozen=True)
class SharedMatch:
    """A pushed variant that fits, and how each GPU runs it."""

    remote: RemoteVariant
    verdicts: tuple[Verdict, ...]
    looked_at: int

    @property
    def described(self) -> Described:
        return self.remote.described

    @property
    def name(self) -> str:
        return default_name(self.described, self.remote.reference)

    @property
    def command(self) -> tuple[str, ...]:
        return ("fdl", "libtorch", "pull", self.remote.pinned)

    def reason(self) -> str:
        covers = " ".join(self.described.cubins + self.described.ptx) or "CPU"
        return f"pull {self.remote.pinned} (built by {self.described.built_by}, covers {covers})"

    def to_json(self) -> dict[str, Any]:
        described = self.described
        return {
            "reference": self.remote.pinned,
            "tag": self.remote.reference.tag,
            "digest": self.remote.digest,
            "torch": described.torch,
            "cuda": described.cuda,
            "archs": list(described.cubins),
            "ptx": list(described.ptx),
            "built_by": described.built_by,
            "verdicts": [verdict.reason for verdict in self.verdicts],
        }


def _fits(
    described: Described,
    gpus: tuple[Capability, ...],
    driver: str | None,
    platform: str,
) -> tuple[Verdict, ...] | None:
    """How each GPU runs the variant, or None when it does not fit."""
    if described.platform != platform:
        return None
    if not gpus:
        return () if described.cuda is None else None
    if described.cuda is None:
        return None
    if driver:
        try:
            if not check_driver(driver, described.cuda).ok:
                return None
        except UsageError:  # a CUDA release fdl does not know: cannot tell the driver
            return None
    codes = described.cubins + described.ptx
    if not codes:
        return None
    try:
        targets = parse_archs(" ".join(codes))
    except UsageError:
        return None
    verdicts = tuple(runs_on(targets, gpu) for gpu in gpus)
    return verdicts if all(verdict.ok for verdict in verdicts) else None


class RepositoryNotFound(UsageError):
    """The registry knows no repository of that name (nothing pushed there, or a typo)."""


def find_shared(
    repository: str,
    *,
    torch: str,
    gpus: Iterable[Capability],
    driver: str | None,
    platform: str,
    credentials: Credentials,
    client_factory: ClientFactory | None = None,
    cuda: str | None = None,
) -> SharedMatch | None:
    """The first variant in ``repository`` of release ``torch`` that runs on ``gpus``
    (and, with ``cuda``, was built with that CUDA release: ``12.9`` matches ``12.9.1``).

    Reads tags and manifests only. Images that are not fdl's variants are passed over.

    Raises:
        NetworkError: the registry cannot be reached or refused the listing.
        RepositoryNotFound: the registry has no such repository.
        UsageError: ``repository`` is not a repository name.
    """
    repo = parse_reference(repository, repository_only=True)
    client = (client_factory or default_client(credentials))(repo.host, repo.repository)
    wanted = tuple(gpus)
    try:
        listed = client.tags(missing_ok=False)
    except RegistryError as exc:
        if exc.status != 404:
            raise
        raise RepositoryNotFound(
            f"the repository {repo.repo} is not found on {repo.host} (the registry knows no "
            "such name): nothing was pushed there, or the name is mistyped",
            hint="check libtorch.registry in fdl.yml ($FDL_LIBTORCH_REGISTRY, --registry); "
            f"the first push makes it: fdl libtorch push VARIANT --to {repo.repo}",
        ) from None
    tags = sorted((t for t in listed if t.startswith(f"{torch}-")), reverse=True)
    for looked_at, tag in enumerate(tags[:MAX_MANIFESTS], start=1):
        try:
            remote = read_remote(client, Reference(repo.host, repo.repository, tag))
        except (VariantMismatch, RegistryError):
            continue
        if remote.described.torch != torch:
            continue
        if cuda is not None and not _same_release(remote.described.cuda, cuda):
            continue
        verdicts = _fits(remote.described, wanted, driver, oci_platform(platform))
        if verdicts is not None:
            return SharedMatch(remote, verdicts, looked_at)
    return None


def _same_release(have: str | None, want: str) -> bool:
    """``12.9.1`` is ``12.9`` (compared on major.minor)."""
    return have is not None and have.split(".")[:2] == want.split(".")[:2]
