"""One torch release's facts read from its own artefacts on PyPI (its project JSON's
Requires-Python and Python tags, its wheels' METADATA pins, the archs and PTX of its
``libtorch_cuda.so`` streamed): the reader ``python -m fdl.refresh`` uses for a release the
tables lack, and ``python -m fdl.refresh learn`` for a release a user names before the
tables know it (kept in fdl's cache, where :func:`fdl.compat.release` finds it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fdl._grammar import quoted

__all__ = [
    "PYPI",
    "Published",
    "ReleaseFacts",
    "learned_entry",
    "minor_of",
    "project_json",
    "published",
    "python_floor",
    "read_release",
    "release_block",
    "tags_text",
    "vkey",
]

PYPI = "https://pypi.org/pypi"

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]


@dataclass(frozen=True)
class Published:
    """One final (not pre-, dev- or yanked) release of a PyPI project."""

    project: str
    version: str
    requires_python: str | None
    python_tags: tuple[str, ...]
    files: tuple[tuple[str, str], ...]  # (filename, URL)


def _final(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not (parsed.is_prerelease or parsed.is_devrelease or parsed.local)


def _tag_key(tag: str) -> tuple[int, int]:
    number = tag[2:].rstrip("t")
    return (int(number[0]), int(number[1:] or 0))


def published(
    project_json: Mapping[str, Any], project: str, base: str | None = None
) -> list[Published]:
    """The project's final releases with at least one file not yanked, oldest first;
    relative file URLs are taken from ``base`` (the project JSON's URL)."""
    from urllib.parse import urljoin

    from packaging.version import Version

    releases = project_json.get("releases")
    found: list[Published] = []
    for version, files in releases.items() if isinstance(releases, dict) else ():
        if not _final(str(version)):
            continue
        kept = [f for f in files or () if isinstance(f, dict) and not f.get("yanked")]
        if not kept:
            continue
        tags = {
            m.group(1)
            for f in kept
            for m in [re.search(r"-(cp3\d+t?)-", str(f.get("filename", "")))]
            if m and not m.group(1).endswith("t")
        }
        pythons = {str(f.get("requires_python")) for f in kept if f.get("requires_python")}
        found.append(
            Published(
                project,
                str(version),
                min(pythons) if pythons else None,
                tuple(sorted(tags, key=_tag_key)),
                tuple(
                    (
                        str(f.get("filename", "")),
                        urljoin(base or f"{PYPI}/{project}/json", str(f.get("url", ""))),
                    )
                    for f in kept
                ),
            )
        )
    return sorted(found, key=lambda p: Version(p.version))


def project_json(read: ReadRange, project: str, *, pypi: str = PYPI, hint: str) -> dict[str, Any]:
    """PyPI's JSON of ``project`` (``{pypi}/{project}/json``), read whole through ``read``.

    Raises:
        NetworkError: it is not a JSON object (malformed, or nested deeper than the parser
            goes), with ``hint``.
    """
    from fdl.errors import NetworkError
    from fdl.net import read_json

    url = f"{pypi}/{project}/json"
    raw, _ = read(url, 0, None)
    found = read_json(raw)
    if not isinstance(found, dict):
        raise NetworkError(f"{url} is not PyPI's JSON for {project}", hint=hint)
    return found


def python_floor(requires_python: str | None) -> str | None:
    """``>=3.11`` -> ``3.11``; ``>=3.8.0`` -> ``3.8``; None without a lower bound."""
    if not requires_python:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specifiers = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return None
    bounds = [s.version for s in specifiers if s.operator in (">=", "~=", "==")]
    if not bounds:
        return None
    best = max(bounds, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)[:2]))
    return ".".join(re.findall(r"\d+", best)[:2])


def tags_text(tags: tuple[str, ...]) -> str:
    if not tags:
        return "no CPython wheel"
    return tags[0] if len(tags) == 1 else f"{tags[0]}-{tags[-1]}"


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


@dataclass(frozen=True)
class ReleaseFacts:
    """What a release's artefacts on PyPI say.

    Attributes:
        archs: The ``TORCH_CUDA_ARCH_LIST`` of the cubins and PTX streamed from the x86_64
            wheel's ``libtorch_cuda.so``; None when not streamed (or a CPU wheel).
        streamed: Bytes read to stream it.
    """

    minor: str
    version: str
    patches: tuple[str, ...]
    requires_python: str | None
    python_tags: tuple[str, ...]
    python_min: str | None
    wheel: str
    cuda: str | None
    cudnn: str | None
    pins: dict[str, str] = field(default_factory=dict)
    archs: str | None = None
    streamed: int = 0
    arm: tuple[str | None, str | None] | None = None  # (CUDA, cuDNN) of the aarch64 wheel


def read_release(
    project: dict[str, Any],
    items: list[Published],
    read: ReadRange,
    *,
    pypi: str = PYPI,
    device_code: bool = True,
) -> ReleaseFacts | None:
    """Read the newest of ``items`` (one minor's patches): None when it has no CPython
    manylinux x86_64 wheel.

    Raises:
        NetworkError: a wheel cannot be read.
    """
    from fdl.refresh._wheel_code import DEFAULT_LIBRARIES, wheel_device_code
    from fdl.refresh._wheels import cuda_facts, pypi_wheels, wheel_metadata

    newest = items[-1]
    wheels = pypi_wheels(project, newest.version, f"{pypi}/torch/json")
    if "linux-x86_64" not in wheels:
        return None
    facts = cuda_facts(wheel_metadata(wheels["linux-x86_64"], read), "x86_64")
    archs, streamed = None, 0
    if device_code and facts.cuda is not None:
        code = wheel_device_code(wheels["linux-x86_64"], read)
        streamed = code.bytes_read
        library = code.libraries.get(DEFAULT_LIBRARIES[0])
        if library is not None:
            archs = library.primary_targets().torch_cuda_arch_list()
    arm = None
    if "linux-aarch64" in wheels:
        found = cuda_facts(wheel_metadata(wheels["linux-aarch64"], read), "aarch64")
        arm = (found.cuda, found.cudnn)
    return ReleaseFacts(
        minor=minor_of(newest.version),
        version=newest.version,
        patches=tuple(i.version for i in items),
        requires_python=newest.requires_python,
        python_tags=newest.python_tags,
        python_min=python_floor(newest.requires_python),
        wheel=wheels["linux-x86_64"].rsplit("/", 1)[-1],
        cuda=facts.cuda,
        cudnn=facts.cudnn,
        pins=facts.pins,
        archs=archs,
        streamed=streamed,
        arm=arm,
    )


def _variant_name(cuda: str) -> tuple[str, str | None]:
    from fdl.compat import toolkit
    from fdl.errors import UsageError

    try:
        return toolkit(cuda).variant, None
    except UsageError:
        return "cu" + cuda.replace(
            ".", ""
        ), f"CUDA {cuda} is not in cuda.yaml: add the toolkit too."


def _default_variant(facts: ReleaseFacts, previous: Any) -> tuple[dict[str, Any], list[str]]:
    """The wheel's variant as a table row, and the notes that say where each value is from."""
    if facts.cuda is None:
        return {"name": "cpu", "default": True}, [f"{facts.wheel} pins no CUDA: a CPU build."]
    pins = ", ".join(f"{k}=={v}" for k, v in sorted(facts.pins.items()))
    notes = [f"Default variant: the METADATA pins of {facts.wheel} ({pins})."]
    name, missing = _variant_name(facts.cuda)
    if missing:
        notes.append(missing)
    archs = facts.archs
    if archs is not None:
        notes.append(
            "Archs: the cubins and PTX of libtorch_cuda.so in that wheel "
            f"(fdl.binaries, streamed: {facts.streamed / 1e6:.1f} MB)."
        )
    else:
        default = next(v for v in previous.variants if v.default)
        archs = default.targets.torch_cuda_arch_list()
        notes.append(f"Archs: {previous.version}'s default variant's (unverified).")
    row: dict[str, Any] = {"name": name, "cuda": facts.cuda, "archs": archs}
    if facts.cudnn:
        row["cudnn"] = facts.cudnn
    row["default"] = True
    return row, notes


def _notes(facts: ReleaseFacts, previous: Any) -> tuple[dict[str, Any], list[str]]:
    row, variant_notes = _default_variant(facts, previous)
    notes = [
        f"python_min: Requires-Python {facts.requires_python} of torch {facts.version}'s "
        f"wheels, which publish {tags_text(facts.python_tags)}.",
        f"cmake_min and cxx_standard: {previous.version}'s (unverified).",
        *variant_notes,
    ]
    if facts.arm is not None:
        notes.append(
            f"Its aarch64 wheel pins CUDA {facts.arm[0] or 'none'}, cuDNN "
            f"{facts.arm[1] or 'none'}: check platforms.linux-arm64."
        )
    return row, notes


def release_block(facts: ReleaseFacts, previous: Any, today: str) -> list[str]:
    """The ``pytorch.yaml`` entry of the release (its lines), its sources in a comment."""
    from fdl.refresh._patch import comment_lines

    row, notes = _notes(facts, previous)
    head = f"{facts.minor} (python -m fdl.refresh, {today}: read from PyPI, not yet reviewed)."
    floor = facts.python_min or previous.source.python_min
    fields = ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in row.items())
    variants = [f"      - {{{fields}}}"]
    if row["name"] != "cpu":
        variants.append("      - {name: cpu}")
    patches = ", ".join(f'"{p}"' for p in facts.patches)
    return [
        *comment_lines("  ", " ".join([head, *notes])),
        f'  - version: "{facts.minor}"',
        f"    patches: [{patches}]",
        f'    source: {{cmake_min: "{previous.source.cmake_min}", cxx_standard: '
        f'{previous.source.cxx_standard}, python_min: "{floor}", verified: false}}',
        "    variants:",
        *variants,
    ]


def learned_entry(facts: ReleaseFacts, previous: Any, today: str) -> dict[str, Any]:
    """The release as fdl's cache keeps it for :func:`fdl.compat.release`: a table row
    with when and where it was read."""
    row, notes = _notes(facts, previous)
    if facts.archs is None and row.get("cuda"):
        # Not streamed: a plan that checks GPUs against them reads them first, rather
        # than plan with the previous release's.
        del row["archs"]
        row["archs_read"] = False
        notes = [
            "Archs: not read (METADATA only); a plan that needs them streams them first."
            if n.startswith("Archs: ")
            else n
            for n in notes
        ]
    notes.append(
        "Its LibTorch archives are taken to exist as for every release in the tables "
        "(download.pytorch.org was not read); only the PyPI build's variant is known."
    )
    variants = [row] if row["name"] == "cpu" else [row, {"name": "cpu"}]
    return {
        "schema_version": 1,
        "version": facts.minor,
        "patches": list(facts.patches),
        "read_on": today,
        "read_from": f"{facts.wheel} on PyPI",
        "source": {
            "cmake_min": previous.source.cmake_min,
            "cxx_standard": previous.source.cxx_standard,
            "python_min": facts.python_min or previous.source.python_min,
        },
        "variants": variants,
        "notes": notes,
    }


def _yaml_scalar(value: object) -> str:
    if value is True:
        return "true"
    text = str(value)
    if re.fullmatch(r"[a-z][a-z0-9]*", text):
        return text
    return quoted("yaml", text, what="a value", source="the release's table row")
