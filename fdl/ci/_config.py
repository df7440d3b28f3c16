"""The ``ci:`` section with its defaults, and the tag scheme.

Shapes were checked when the manifest loaded (:mod:`fdl.manifest.sections.ci`); this
module checks what needs more than the section: the tag scheme's placeholders, the
platforms fdl can provide libtorch for, a registry where caches need one.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.ci._data import ci_data
from fdl.ci._fdl import fdl_install
from fdl.ci._matrix import CiConfig
from fdl.errors import ManifestError
from fdl.manifest import Manifest

__all__ = ["fill_tag", "located", "read_config", "repository_root", "tag_fields"]

_IMAGE_REF = re.compile(
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
)


def located(manifest: Manifest, key: str, message: str, hint: str | None = None) -> ManifestError:
    """A ManifestError at the value of a dotted key whose parts may be list indices
    (``ci.variants.1``); without a location when no layer wrote the value."""
    from fdl.manifest import MapNode, Node, SeqNode

    node: Node | None = manifest.tree if key else None
    for part in key.split("."):
        if isinstance(node, MapNode):
            node = node.entries.get(part)
        elif isinstance(node, SeqNode) and part.isdigit() and int(part) < len(node.items):
            node = node.items[int(part)]
        else:
            node = None
            break
    location = node.origin.location() if node is not None else None
    return ManifestError(f"{key}: {message}", location=location, hint=hint)


_error = located


def repository_root(directory: Path) -> Path:
    """The nearest directory at or above ``directory`` holding ``.git``, else ``directory``."""
    current = directory.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return current


def tag_fields(scheme: str) -> list[str]:
    """The placeholders a tag scheme uses (``{registry}`` -> ``registry``)."""
    return [name for _, name, _, _ in string.Formatter().parse(scheme) if name is not None]


def fill_tag(scheme: str, values: Mapping[str, str]) -> str:
    """The scheme with its placeholders replaced."""
    return scheme.format_map(dict(values))


def read_config(
    manifest: Manifest, *, project: str, repo_root: Path | None = None, env: str | None = None
) -> CiConfig:
    """The ``ci:`` section of ``manifest`` with defaults applied.

    Args:
        manifest: The loaded manifest.
        project: The default ``{project}`` (the images' project name).
        repo_root: The repository root (default: found by looking for ``.git``).
        env: The overlay the manifest was loaded with (named in the files' header).

    Raises:
        ManifestError: no ``ci:`` section, or values that do not fit together.
    """
    raw: dict[str, Any] | None = manifest.get("ci")
    if not raw:
        raise ManifestError(
            f"{manifest.source} has no `ci:` section",
            hint="declare the matrix, e.g.\nci:\n  registry: ghcr.io/you\n  variants: [cpu, cu130]",
        )
    defaults = ci_data().defaults
    registry = raw.get("registry")
    scheme = str(raw.get("tag") or defaults["tag" if registry else "tag_without_registry"])
    _check_scheme(manifest, scheme, registry)
    cache = raw.get("cache") or {}
    cache_registry = cache.get("registry")
    if cache_registry and not registry:
        raise _error(
            manifest,
            "ci.cache.registry",
            "a registry cache needs `ci.registry`",
            hint="set ci.registry (e.g. ghcr.io/you), or use cache.gha",
        )
    root = repo_root if repo_root is not None else repository_root(manifest.directory)
    try:
        working = manifest.directory.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:  # a repository root that does not hold the project: run in place
        working = "."
    runner = _runner(raw.get("runner")) or str(defaults["runner"])

    return CiConfig(
        registry=str(registry) if registry else None,
        project=str(raw.get("project") or project),
        tag=scheme,
        version=str(raw.get("version") or defaults["version"]),
        platforms=_platforms(manifest, raw.get("platforms") or defaults["platforms"]),
        cache_registry=bool(registry) if cache_registry is None else bool(cache_registry),
        cache_gha=bool(cache.get("gha")),
        cache_mode=str(cache.get("mode") or "max"),
        runner=runner,
        build_runner=_runner(raw.get("build-runner")) or runner,
        branch=str(raw.get("branch") or defaults["branch"]),
        fdl=fdl_install(manifest, manifest.directory, root),
        python=str(raw.get("python") or defaults["python"]),
        output=Path(str(raw.get("output") or defaults["output"])).as_posix(),
        workflow=Path(str(raw.get("workflow") or defaults["workflow"])).as_posix(),
        working_directory=working,
        env=env,
        source=" + ".join(layer.source for layer in manifest.layers if layer.path is not None)
        or manifest.source,
    )


def _runner(value: object) -> str | tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return str(value)


def _check_scheme(manifest: Manifest, scheme: str, registry: object) -> None:
    from fdl.manifest.sections.ci import TAG_FIELDS

    try:
        used = tag_fields(scheme)
    except ValueError as exc:
        raise _error(manifest, "ci.tag", f"{scheme!r} is not a tag scheme ({exc})") from None
    unknown = [name for name in used if name not in TAG_FIELDS]
    if unknown:
        raise _error(
            manifest,
            "ci.tag",
            f"unknown placeholder {{{unknown[0]}}} in the tag scheme",
            hint="placeholders: {" + "}, {".join(TAG_FIELDS) + "}",
        )
    if "registry" in used and not registry:
        raise _error(
            manifest, "ci.tag", "the tag scheme uses {registry}, and ci.registry is not set"
        )
    missing = [name for name in ("profile", "variant") if name not in used]
    if missing:
        raise _error(
            manifest,
            "ci.tag",
            f"the tag scheme has no {{{missing[0]}}}: cells would share a tag",
            hint="e.g. {registry}/{project}-{profile}:{variant}-{version}",
        )
    sample = fill_tag(scheme, {name: "x" for name in TAG_FIELDS} | {"registry": "r.io/x"})
    if not _IMAGE_REF.fullmatch(sample):
        raise _error(
            manifest,
            "ci.tag",
            f"{scheme!r} does not make image names like name:tag",
            hint="e.g. {registry}/{project}-{profile}:{variant}-{version}",
        )


def _platforms(manifest: Manifest, values: list[str]) -> tuple[str, ...]:
    from fdl.compat import libtorch_platforms

    data = ci_data()
    for index, platform in enumerate(values):
        fdl_name = data.platforms.get(platform)
        if fdl_name is None or fdl_name not in libtorch_platforms():
            raise _error(
                manifest,
                f"ci.platforms.{index}",
                f"fdl cannot provide libtorch for {platform} images",
                hint="the variant is installed on the runner and copied into the image; "
                "official libtorch downloads exist for linux/amd64 only",
            )
    return tuple(dict.fromkeys(str(value) for value in values))
