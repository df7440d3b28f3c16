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

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fdl._text import printable
from fdl.errors import NetworkError
from fdl.refresh import _patch
from fdl.refresh._release import (
    PYPI,
    Published,
    minor_of,
    project_json,
    published,
    python_floor,
    read_release,
    release_block,
    tags_text,
    vkey,
)
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

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]
Derive = Callable[[str], Derived]


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
        return asdict(self)


def _toolkit_finding(minor: str, found: str, source: str, *, changed: bool = True) -> Finding:
    """The finding of CUDA ``minor``, a toolkit ``cuda.yaml`` lacks."""
    return Finding("cuda.yaml", f"CUDA {minor}", "toolkit", None, found, source, changed=changed)


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


@dataclass(frozen=True)
class _Run:
    """One :func:`refresh_tables`: where its findings go (``result``), how it reads PyPI
    (``read``, at ``pypi``), the date its notes name, and what it reads of a new release
    (``device_code``) or toolkit (``derive``)."""

    result: Refresh
    read: ReadRange
    pypi: str
    today: str
    device_code: bool
    derive: Derive | None


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
        projects[project] = project_json(
            counted,
            project,
            pypi=pypi,
            hint="check the PyPI address ($FDL_PYPI_URL), or run again later",
        )
    texts = {name: (tables / name).read_text() for name in ("pytorch.yaml", "cuda.yaml")}
    edited = dict(texts)
    run = _Run(result, counted, pypi, today, device_code, derive)
    edited["pytorch.yaml"] = _torch(run, edited["pytorch.yaml"], projects["torch"])
    edited["cuda.yaml"] = _toolkits(
        run, edited["cuda.yaml"], projects["cuda-toolkit"], projects["nvidia-cuda-nvcc"]
    )
    if any(edited[name] != texts[name] for name in texts):
        # the diff is the review: the date it was made is the tables' `reviewed:`
        edited["pytorch.yaml"] = re.sub(
            r'(?m)^reviewed: "[0-9-]+"$', f'reviewed: "{today}"', edited["pytorch.yaml"], count=1
        )
    result.texts = {name: (texts[name], edited[name]) for name in texts}
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _torch(run: _Run, text: str, project: dict[str, Any]) -> str:
    from fdl.compat import releases

    known = {r.version: r for r in releases()}
    by_minor: dict[str, list[Published]] = {}
    for item in published(project, "torch", f"{run.pypi}/torch/json"):
        if vkey(item.version) >= vkey(min(known, key=vkey)):
            by_minor.setdefault(minor_of(item.version), []).append(item)
    newest = max(known, key=vkey)
    for minor, items in sorted(by_minor.items(), key=lambda kv: vkey(kv[0])):
        rel = known.get(minor)
        if rel is None:
            if vkey(minor) > vkey(newest):
                text = _new_release(run, text, project, items)
            continue
        for item in items:
            if item.version not in rel.patches:
                text = _patch.add_patch_release(text, minor, item.version)
                run.result.findings.append(
                    Finding(
                        "pytorch.yaml",
                        f"torch {minor}",
                        "patches",
                        ", ".join(rel.patches),
                        item.version,
                        f"{run.pypi}/torch/{item.version}/json ({run.today})",
                    )
                )
        floors: dict[str, Published] = {}
        for item in items:
            floor_of = python_floor(item.requires_python)
            if floor_of is not None:
                floors.setdefault(floor_of, item)
        if not floors:
            continue
        floor = max(floors, key=vkey)
        if floor != rel.source.python_min:
            item = floors[floor]
            source = (
                # PyPI's text into a YAML comment of the tables: one line (fdl._text.printable)
                f"Requires-Python of torch {item.version}'s wheels is "
                f"{printable(item.requires_python or '', 120)} "
                f"and it publishes {tags_text(item.python_tags)} "
                f"({run.pypi}/torch/json, {run.today}; it was {rel.source.python_min} here)"
            )
            text = _patch.set_python_min(text, minor, floor, f"python_min {floor}: {source}")
            run.result.findings.append(
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


def _new_release(run: _Run, text: str, project: dict[str, Any], items: list[Published]) -> str:
    """A release entry for a minor the tables lack, read from its newest patch's wheels."""
    from fdl.compat import releases

    facts = read_release(project, items, run.read, pypi=run.pypi, device_code=run.device_code)
    if facts is None:
        run.result.findings.append(
            Finding(
                "pytorch.yaml",
                f"torch {minor_of(items[-1].version)}",
                "release",
                None,
                items[-1].version,
                f"no CPython manylinux x86_64 wheel of torch {items[-1].version} on PyPI: not read",
                changed=False,
            )
        )
        return text
    floor = facts.python_min or releases()[-1].source.python_min
    run.result.findings.append(
        Finding(
            "pytorch.yaml",
            f"torch {facts.minor}",
            "release",
            None,
            f"{facts.version}: CUDA {facts.cuda}, cuDNN {facts.cudnn}, Python >= {floor}",
            f"{facts.wheel} on PyPI ({run.today})",
        )
    )
    return _patch.add_release(text, release_block(facts, releases()[-1], run.today))


def _toolkits(
    run: _Run, text: str, toolkit_project: dict[str, Any], nvcc_project: dict[str, Any]
) -> str:
    from fdl.compat import toolkits

    finals: dict[str, list[str]] = {}
    for item in published(toolkit_project, "cuda-toolkit"):
        finals.setdefault(minor_of(item.version), []).append(item.version)
    nvcc_minors = {minor_of(i.version) for i in published(nvcc_project, "nvidia-cuda-nvcc")}
    kits = toolkits()
    known = {k.version: k for k in kits}
    for kit in kits:
        versions = finals.get(kit.version)
        if not versions:
            continue
        newest = max(versions, key=vkey)
        pinned = kit.image.version
        source = (
            f"cuda-toolkit on PyPI ({run.today}) has {', '.join(versions)} as final "
            f"{kit.version} releases"
        )
        if pinned not in versions:
            note = (
                f"{newest}: the newest final cuda-toolkit {kit.version} release on PyPI "
                f"({run.today}); {pinned} was never a final one there. The nvidia/cuda tag "
                "itself was not read."
            )
            text = _patch.set_image_version(text, kit.version, newest, note)
            run.result.findings.append(
                Finding("cuda.yaml", f"CUDA {kit.version}", "image.version", pinned, newest, source)
            )
        elif vkey(newest) > vkey(pinned):
            changed = not kit.image.verified
            if changed:
                note = (
                    f"{newest}: the newest final cuda-toolkit {kit.version} release on PyPI "
                    f"({run.today}; it was {pinned}). The nvidia/cuda tag itself was not read."
                )
                text = _patch.set_image_version(text, kit.version, newest, note)
            run.result.findings.append(
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
    newest_known = max(known, key=vkey)
    for minor in sorted(set(finals) | nvcc_minors, key=vkey):
        if minor in known or vkey(minor) < vkey(newest_known):
            continue
        text = _new_toolkit(run, text, minor, finals.get(minor, []), known)
    return text


def _new_toolkit(
    run: _Run, text: str, minor: str, toolkit_versions: list[str], known: Mapping[str, Any]
) -> str:
    from fdl.compat import toolkit

    if run.derive is None:
        run.result.findings.append(
            _toolkit_finding(
                minor,
                minor,
                f"nvidia-cuda-nvcc / cuda-toolkit on PyPI ({run.today}); its nvcc wheel was not "
                f"read: python -m fdl.refresh toolkits {minor}",
                changed=False,
            )
        )
        return text
    derived = run.derive(minor)
    parent = max((v for v in known if vkey(v) < vkey(minor)), key=vkey)
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
    image = max(toolkit_versions, key=vkey) if toolkit_versions else f"{minor}.0"
    ubuntu = ", ".join(f'"{u}"' for u in base.image.ubuntu)
    lines.append(
        f'    image: {{version: "{image}", ubuntu: [{ubuntu}], '
        f"cudnn_tag: {base.image.cudnn_tag}, verified: false}}"
    )
    note = (
        f"{minor} (python -m fdl.refresh, {run.today}: not yet reviewed): archs from ptxas --help "
        f"of {derived.wheel} (ptxas {derived.ptxas_version}), host compilers from its "
        f"crt/host_config.h; image: the newest final cuda-toolkit {minor} release on PyPI "
        f"({image if toolkit_versions else 'none yet: a guess'}), the nvidia/cuda tag not read; "
        f"Ubuntu releases and cuDNN tag: {parent}'s."
    )
    text = _patch.add_toolkit(text, [*_patch.comment_lines("  ", note), *lines])
    text = _patch.add_ptx_jit_row(
        text, minor, f"not on PyPI: add CUDA {minor} GA's driver from its release notes"
    )
    run.result.findings.append(
        _toolkit_finding(
            minor,
            f"archs {' '.join(derived.archs)}; gcc {gcc}, clang {clang}; image {image}",
            derived.wheel,
        )
    )
    return text
