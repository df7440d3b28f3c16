"""``fdl ci pushed``: which variants of the matrix the team's registry already holds.

The lookup (:func:`find_pushed`) reads tags and manifests of the registry, never a layer,
and happens before and apart from planning: what it finds is printed as ``ci.pushed``
entries to put in the manifest, so the generated files stay a function of the manifest.
A variant fits when it is the matrix variant's torch release and CUDA release, runs on
every arch the matrix variant is planned for, and is the platform the images are built for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fdl.ci._data import ci_data
from fdl.ci._matrix import Matrix, MatrixVariant

if TYPE_CHECKING:
    from fdl.compat import Capability
    from fdl.libtorch import SharedMatch

__all__ = ["PushedFinding", "find_pushed", "pushed_entries"]


@dataclass(frozen=True)
class PushedFinding:
    """One variant of the matrix and what the registry holds for it.

    Attributes:
        key: The variant as written in ``ci.variants``.
        reference: The fitting pushed variant, pinned by digest (None: none fits).
        pinned: What ``ci.pushed`` says now (None: nothing).
        reason: Who built it and what it covers, or why nothing fits.
    """

    key: str
    reference: str | None
    pinned: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.key,
            "reference": self.reference,
            "pinned": self.pinned,
            "reason": self.reason,
        }


def wanted_gpus(variant: MatrixVariant) -> tuple[Capability, ...]:
    """The GPUs a pushed stand-in must run on: one per arch the variant is planned for."""
    from fdl.compat import parse_archs

    if not variant.ref.archs:
        return ()
    return tuple(
        dict.fromkeys(target.capability for target in parse_archs(" ".join(variant.ref.archs)))
    )


def find_pushed(
    matrix: Matrix,
    registry: str,
    *,
    credentials: Any,
    client_factory: Any = None,
) -> dict[str, SharedMatch | None]:
    """For every variant of the matrix, the first pushed variant in ``registry`` that fits.

    Raises:
        NetworkError: the registry cannot be reached or refused the listing.
        UsageError: ``registry`` is not a repository name.
    """
    from fdl.libtorch import find_shared

    platform = ci_data().platforms[matrix.config.platforms[0]]
    return {
        variant.key: find_shared(
            registry,
            torch=variant.torch,
            gpus=wanted_gpus(variant),
            driver=None,
            platform=platform,
            credentials=credentials,
            client_factory=client_factory,
            cuda=variant.cuda,
        )
        for variant in matrix.variants
    }


def pushed_entries(
    matrix: Matrix, found: Mapping[str, SharedMatch | None], registry: str
) -> list[PushedFinding]:
    """What the lookup found, variant by variant in the matrix's order (pure)."""
    findings = []
    for variant in matrix.variants:
        match = found.get(variant.key)
        if match is None:
            cuda = f"CUDA {variant.cuda}" if variant.cuda else "CPU"
            archs = " ".join(variant.ref.archs) or "no GPU"
            reason = f"none in {registry} is torch {variant.torch}, {cuda}, for {archs}"
            findings.append(PushedFinding(variant.key, None, variant.pushed, reason))
        else:
            findings.append(
                PushedFinding(
                    variant.key,
                    match.remote.pinned,
                    variant.pushed,
                    f"built by {match.described.built_by}, covers {match.described.covers_text}",
                )
            )
    return findings
