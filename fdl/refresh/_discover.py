"""What PyPI has that the tables lack, found without being told a version.

The torch releases and CUDA toolkit releases (``cuda-toolkit``, ``nvidia-cuda-nvcc``) on
PyPI are compared with ``pytorch.yaml`` and ``cuda.yaml``: a release or toolkit the tables
lack is read (Requires-Python and the Python tags it publishes, its wheel's CUDA and cuDNN
pins, the archs and PTX of its ``libtorch_cuda.so``; a toolkit's archs and host compilers
from its nvcc wheel) and becomes an entry; a known release whose Requires-Python is not its
``python_min``, a patch release the tables lack, and an image pin that is not the newest
final toolkit release become one-line changes. Each change carries its source as a YAML
comment, and the result is a unified diff of the tables (:mod:`fdl.refresh._patch`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl.errors import NetworkError
from fdl.refresh import _patch
from fdl.refresh._toolkits import Derived

__all__ = [
    "PYPI",
    "Finding",
    "Published",
    "Refresh",
    "published",
    "python_floor",
    "refresh_tables",
]

PYPI = "https://pypi.org/pypi"

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]
Derive = Callable[[str], Derived]


@dataclass(frozen=True)
class Published:
    """One final (not pre-, dev- or yanked) release of a PyPI project."""

    project: str
    version: str
    requires_python: str | None
    python_tags: tuple[str, ...]
    files: tuple[tuple[str, str], ...]  # (filename, URL)


@dataclass(frozen=True)
class Finding:
    """One difference between a table and what PyPI publishes.

    ``changed`` is False when the tool reports it without editing the table (a checked
    pin that has a newer patch, a toolkit whose wheel was not read).
    """

    table: str
    subject: str
    fact: str
    table_value: str | None
    found: str | None
    source: str
    changed: bool = True

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.table,
            "subject": self.subject,
            "fact": self.fact,
            "table_value": self.table_value,
            "found": self.found,
            "source": self.source,
            "changed": self.changed,
        }


@dataclass
class Refresh:
    """The findings, the tables' text before and after, and what reading cost."""

    findings: list[Finding] = field(default_factory=list)
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)
    bytes_read: int = 0
    seconds: float = 0.0

    def diff(self) -> str:
        """The unified diff of every table that changed (paths from the repository root)."""
        return "".join(
            _patch.unified_diff(f"fdl/data/compat/{name}", before, after)
            for name, (before, after) in sorted(self.texts.items())
            if before != after
        )


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


def _tags_text(tags: tuple[str, ...]) -> str:
    if not tags:
        return "no CPython wheel"
    return tags[0] if len(tags) == 1 else f"{tags[0]}-{tags[-1]}"


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def refresh_tables(
    read: ReadRange,
    tables: Path,
    *,
    pypi: str = PYPI,
    today: str,
    device_code: bool = True,
    derive: Derive | None = None,
) -> Refresh:
    """Compare the tables under ``tables`` with PyPI and edit their text.

    Args:
        read: ``(url, start, length) -> (bytes, total)`` (:func:`fdl.net.read_range`).
        tables: The directory of ``pytorch.yaml`` and ``cuda.yaml`` (read, never written).
        pypi: PyPI's JSON API root (``https://pypi.org/pypi``).
        today: The date the source comments name.
        device_code: Stream a new release's ``libtorch_cuda.so`` for its archs and PTX.
        derive: Reads a new toolkit's nvcc wheel (:func:`fdl.refresh.derive_toolkit`);
            None reports a new toolkit without an entry.

    Raises:
        NetworkError: PyPI or a wheel cannot be read.
    """
    result = Refresh()

    def counted(url: str, start: int, length: int | None) -> tuple[bytes, int]:
        # a reset in the middle of streaming 360 MB should not cost the whole run
        for attempt in range(3):
            try:
                data, total = read(url, start, length)
                break
            except NetworkError:
                if attempt == 2:
                    raise
                time.sleep(2.0 * (attempt + 1))
        result.bytes_read += len(data)
        return data, total

    started = time.monotonic()
    projects: dict[str, dict[str, Any]] = {}
    for project in ("torch", "cuda-toolkit", "nvidia-cuda-nvcc"):
        raw, _ = counted(f"{pypi}/{project}/json", 0, None)
        projects[project] = json.loads(raw)
    texts = {name: (tables / name).read_text() for name in ("pytorch.yaml", "cuda.yaml")}
    edited = dict(texts)
    edited["pytorch.yaml"] = _torch(
        result, edited["pytorch.yaml"], projects["torch"], counted, today, device_code, pypi
    )
    edited["cuda.yaml"] = _toolkits(
        result,
        edited["cuda.yaml"],
        projects["cuda-toolkit"],
        projects["nvidia-cuda-nvcc"],
        today,
        derive,
    )
    result.texts = {name: (texts[name], edited[name]) for name in texts}
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _torch(
    result: Refresh,
    text: str,
    project: dict[str, Any],
    read: ReadRange,
    today: str,
    device_code: bool,
    pypi: str,
) -> str:
    from fdl.compat import releases

    known = {r.version: r for r in releases()}
    by_minor: dict[str, list[Published]] = {}
    for item in published(project, "torch", f"{pypi}/torch/json"):
        if _vkey(item.version) >= _vkey(min(known, key=_vkey)):
            by_minor.setdefault(_minor(item.version), []).append(item)
    newest = max(known, key=_vkey)
    for minor, items in sorted(by_minor.items(), key=lambda kv: _vkey(kv[0])):
        rel = known.get(minor)
        if rel is None:
            if _vkey(minor) > _vkey(newest):
                text = _new_release(result, text, project, items, read, today, device_code, pypi)
            continue
        for item in items:
            if item.version not in rel.patches:
                text = _patch.add_patch_release(text, minor, item.version)
                result.findings.append(
                    Finding(
                        "pytorch.yaml",
                        f"torch {minor}",
                        "patches",
                        ", ".join(rel.patches),
                        item.version,
                        f"{pypi}/torch/{item.version}/json ({today})",
                    )
                )
        floors: dict[str, Published] = {}
        for item in items:
            floor_of = python_floor(item.requires_python)
            if floor_of is not None:
                floors.setdefault(floor_of, item)
        if not floors:
            continue
        floor = max(floors, key=_vkey)
        if floor != rel.source.python_min:
            item = floors[floor]
            source = (
                f"Requires-Python of torch {item.version}'s wheels is {item.requires_python} "
                f"and it publishes {_tags_text(item.python_tags)} "
                f"({pypi}/torch/json, {today}; it was {rel.source.python_min} here)"
            )
            text = _patch.set_python_min(text, minor, floor, f"python_min {floor}: {source}")
            result.findings.append(
                Finding(
                    "pytorch.yaml",
                    f"torch {minor}",
                    "python_min",
                    rel.source.python_min,
                    floor,
                    source,
                )
            )
    return text


def _new_release(
    result: Refresh,
    text: str,
    project: dict[str, Any],
    items: list[Published],
    read: ReadRange,
    today: str,
    device_code: bool,
    pypi: str,
) -> str:
    """A release entry for a minor the tables lack, read from its newest patch's wheels."""
    from fdl.compat import release, releases, toolkit
    from fdl.errors import UsageError
    from fdl.refresh._wheel_code import DEFAULT_LIBRARIES, wheel_device_code
    from fdl.refresh._wheels import cuda_facts, pypi_wheels, wheel_metadata

    newest = items[-1]
    minor = _minor(newest.version)
    previous = releases()[-1]
    wheels = pypi_wheels(project, newest.version, f"{pypi}/torch/json")
    if "linux-x86_64" not in wheels:
        result.findings.append(
            Finding(
                "pytorch.yaml",
                f"torch {minor}",
                "release",
                None,
                newest.version,
                f"no CPython manylinux x86_64 wheel of torch {newest.version} on PyPI: not read",
                changed=False,
            )
        )
        return text
    facts = cuda_facts(wheel_metadata(wheels["linux-x86_64"], read), "x86_64")
    wheel_name = wheels["linux-x86_64"].rsplit("/", 1)[-1]
    floor = python_floor(newest.requires_python) or previous.source.python_min
    notes = [
        f"{minor} (python -m fdl.refresh, {today}: read from PyPI, not yet reviewed).",
        f"python_min: Requires-Python {newest.requires_python} of torch {newest.version}'s",
        f"wheels, which publish {_tags_text(newest.python_tags)};",
        f"cmake_min and cxx_standard: {previous.version}'s (unverified).",
    ]
    variants: list[str] = []
    if facts.cuda is None:
        variants.append("      - {name: cpu, default: true}")
        notes.append(f"{wheel_name} pins no CUDA: a CPU build.")
    else:
        pins = ", ".join(f"{k}=={v}" for k, v in sorted(facts.pins.items()))
        notes.append(f"Default variant: the METADATA pins of {wheel_name} ({pins}).")
        try:
            name = toolkit(facts.cuda).variant
        except UsageError:
            name = "cu" + facts.cuda.replace(".", "")
            notes.append(f"CUDA {facts.cuda} is not in cuda.yaml: add the toolkit too.")
        archs = None
        if device_code:
            code = wheel_device_code(wheels["linux-x86_64"], read)
            library = code.libraries.get(DEFAULT_LIBRARIES[0])
            if library is not None:
                archs = library.primary_targets().torch_cuda_arch_list()
                notes.append(
                    f"Archs: the cubins and PTX of libtorch_cuda.so in that wheel "
                    f"(fdl.binaries, streamed: {code.bytes_read / 1e6:.1f} MB)."
                )
        if archs is None:
            default = next(v for v in release(previous.version).variants if v.default)
            archs = default.targets.torch_cuda_arch_list()
            notes.append(f"Archs: {previous.version}'s default variant's (unverified).")
        cudnn = f', cudnn: "{facts.cudnn}"' if facts.cudnn else ""
        variants.append(
            f'      - {{name: {name}, cuda: "{facts.cuda}", archs: "{archs}"{cudnn}, default: true}}'
        )
        variants.append("      - {name: cpu}")
    if "linux-aarch64" in wheels:
        arm = cuda_facts(wheel_metadata(wheels["linux-aarch64"], read), "aarch64")
        notes.append(
            f"Its aarch64 wheel pins CUDA {arm.cuda or 'none'}, cuDNN {arm.cudnn or 'none'}: "
            "check platforms.linux-arm64."
        )
    patches = ", ".join(f'"{i.version}"' for i in items)
    block = [
        *_patch_comment(" ".join(notes)),
        f'  - version: "{minor}"',
        f"    patches: [{patches}]",
        f'    source: {{cmake_min: "{previous.source.cmake_min}", cxx_standard: '
        f'{previous.source.cxx_standard}, python_min: "{floor}", verified: false}}',
        "    variants:",
        *variants,
    ]
    result.findings.append(
        Finding(
            "pytorch.yaml",
            f"torch {minor}",
            "release",
            None,
            f"{newest.version}: CUDA {facts.cuda}, cuDNN {facts.cudnn}, Python >= {floor}",
            f"{wheel_name} on PyPI ({today})",
        )
    )
    return _patch.add_release(text, block)


def _patch_comment(text: str, indent: str = "  ") -> list[str]:
    from fdl.refresh._patch import _comment

    return _comment(indent, text)


def _toolkits(
    result: Refresh,
    text: str,
    toolkit_project: dict[str, Any],
    nvcc_project: dict[str, Any],
    today: str,
    derive: Derive | None,
) -> str:
    from fdl.compat import toolkits

    finals: dict[str, list[str]] = {}
    for item in published(toolkit_project, "cuda-toolkit"):
        finals.setdefault(_minor(item.version), []).append(item.version)
    nvcc_minors = {_minor(i.version) for i in published(nvcc_project, "nvidia-cuda-nvcc")}
    kits = toolkits()
    known = {k.version: k for k in kits}
    for kit in kits:
        versions = finals.get(kit.version)
        if not versions:
            continue
        newest = max(versions, key=_vkey)
        pinned = kit.image.version
        source = (
            f"cuda-toolkit on PyPI ({today}) has {', '.join(versions)} as final "
            f"{kit.version} releases"
        )
        if pinned not in versions:
            note = (
                f"{newest}: the newest final cuda-toolkit {kit.version} release on PyPI "
                f"({today}); {pinned} was never a final one there. The nvidia/cuda tag "
                "itself was not read."
            )
            text = _patch.set_image_version(text, kit.version, newest, note)
            result.findings.append(
                Finding("cuda.yaml", f"CUDA {kit.version}", "image.version", pinned, newest, source)
            )
        elif _vkey(newest) > _vkey(pinned):
            changed = not kit.image.verified
            if changed:
                note = (
                    f"{newest}: the newest final cuda-toolkit {kit.version} release on PyPI "
                    f"({today}; it was {pinned}). The nvidia/cuda tag itself was not read."
                )
                text = _patch.set_image_version(text, kit.version, newest, note)
            result.findings.append(
                Finding(
                    "cuda.yaml",
                    f"CUDA {kit.version}",
                    "image.version",
                    pinned,
                    newest,
                    source + ("" if changed else f"; {pinned} is a checked tag: kept"),
                    changed,
                )
            )
    newest_known = max(known, key=_vkey)
    for minor in sorted(set(finals) | nvcc_minors, key=_vkey):
        if minor in known or _vkey(minor) < _vkey(newest_known):
            continue
        text = _new_toolkit(result, text, minor, finals.get(minor, []), known, today, derive)
    return text


def _new_toolkit(
    result: Refresh,
    text: str,
    minor: str,
    toolkit_versions: list[str],
    known: Mapping[str, Any],
    today: str,
    derive: Derive | None,
) -> str:
    from fdl.compat import toolkit

    if derive is None:
        result.findings.append(
            Finding(
                "cuda.yaml",
                f"CUDA {minor}",
                "toolkit",
                None,
                minor,
                f"nvidia-cuda-nvcc / cuda-toolkit on PyPI ({today}); its nvcc wheel was not "
                f"read: python -m fdl.refresh toolkits {minor}",
                changed=False,
            )
        )
        return text
    derived = derive(minor)
    parent = max((v for v in known if _vkey(v) < _vkey(minor)), key=_vkey)
    base = toolkit(parent)
    parent_archs = {t.code.removeprefix("sm_") for t in base.targets if t.kind.name != "PTX"}
    lines = [f'  - version: "{minor}"', f'    inherit: "{parent}"']
    added = [a for a in derived.archs if a not in parent_archs]
    if parent_archs <= set(derived.archs):
        if added:
            lines.append(f'    archs_add: "{" ".join(added)}"')
    else:
        lines.append(f'    archs: "{" ".join(derived.archs)}"')
    gcc, clang = derived.compilers.get("gcc"), derived.compilers.get("clang")
    if gcc and clang and (gcc, clang) != (base.compilers.gcc, base.compilers.clang):
        lines.append(f"    compilers: {{gcc: {gcc}, clang: {clang}}}")
    image = max(toolkit_versions, key=_vkey) if toolkit_versions else f"{minor}.0"
    ubuntu = ", ".join(f'"{u}"' for u in base.image.ubuntu)
    lines.append(
        f'    image: {{version: "{image}", ubuntu: [{ubuntu}], '
        f"cudnn_tag: {base.image.cudnn_tag}, verified: false}}"
    )
    note = (
        f"{minor} (python -m fdl.refresh, {today}: not yet reviewed): archs from ptxas --help "
        f"of {derived.wheel} (ptxas {derived.ptxas_version}), host compilers from its "
        f"crt/host_config.h; image: the newest final cuda-toolkit {minor} release on PyPI "
        f"({image if toolkit_versions else 'none yet: a guess'}), the nvidia/cuda tag not read; "
        f"Ubuntu releases and cuDNN tag: {parent}'s."
    )
    text = _patch.add_toolkit(text, [*_patch_comment(note), *lines])
    text = _patch.add_ptx_jit_row(
        text, minor, f"not on PyPI: add CUDA {minor} GA's driver from its release notes"
    )
    result.findings.append(
        Finding(
            "cuda.yaml",
            f"CUDA {minor}",
            "toolkit",
            None,
            f"archs {' '.join(derived.archs)}; gcc {gcc}, clang {clang}; image {image}",
            derived.wheel,
        )
    )
    return text
