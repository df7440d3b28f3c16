"""A libtorch variant made from a PyTorch wheel (a ``.whl``, a Python environment, or pip).

The PyPI wheel ships the C++ distribution under ``torch/{lib,include,share}``; copied out
without the Python-only parts it is a libtorch that CMake's ``find_package(Torch)`` accepts.
This works where download.pytorch.org is unreachable but a PyPI mirror is not.

``fdl libtorch install --from-wheel`` and the wheel path of ``fdl setup`` call
:func:`wheel_source` and :func:`install_wheel`; so can any Python code (no CLI involved)::

    from fdl.libtorch import install_wheel, wheel_source

    source = wheel_source(torch="2.13", cache=cache / "wheels", runner=default_runner())
    result = install_wheel(context, source, cache=cache / "wheels", runner=default_runner())
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from fdl.archive import ArchiveError, read_member
from fdl.compat import resolve_torch_version
from fdl.errors import EnvironmentProblem, FdlError, UsageError
from fdl.formats.wheel import dist_info_member, parse_metadata, parse_version_py
from fdl.libtorch._install import InstallResult
from fdl.libtorch.sources import install_source
from fdl.libtorch.sources._generated import check_wheel_facts
from fdl.libtorch.sources._nvidia import (
    pip_saved_files,
)
from fdl.libtorch.sources._pip import Pip
from fdl.libtorch.sources._wheel_tree import FromWheel, NvidiaOptions, WheelSource
from fdl.paths import Context
from fdl.runner import Runner

__all__ = [
    "WheelSource",
    "check_wheel",
    "install_wheel",
    "installed_torch",
    "wheel_from_environment",
    "wheel_from_file",
    "wheel_from_pip",
    "wheel_source",
]

LineCallback = Callable[[str], None]


_INDEX_VARIANT = re.compile(r"/whl/(?:nightly/)?(cpu|cu[0-9]{3})/?$")


def index_variant(index_url: str | None) -> str | None:
    """The build an index URL of download.pytorch.org's form names (``.../whl/cu129``)."""
    found = _INDEX_VARIANT.search(index_url.strip()) if index_url else None
    return found.group(1) if found else None


def check_wheel(
    source: WheelSource,
    *,
    torch: str | None = None,
    variant: str | None = None,
    index_url: str | None = None,
    variant_origin: str | None = None,
) -> None:
    """Refuse a wheel that is not what was asked for, before anything is installed.

    What was asked: the torch release (``--torch``); the build, from ``variant`` (the
    manifest's ``libtorch.variant``, unless ``auto``) or from an index URL of
    download.pytorch.org's form (``.../whl/cpu``). pip falls back to other indexes when one
    cannot be reached, and then fetches PyPI's default (CUDA) build.

    Args:
        variant_origin: Where ``variant`` was pinned (``fdl.yml:3:12``): a wheel file of
            another build then conflicts with that pin, and the refusal says so.

    Raises:
        UsageError: the wheel is another release or another build.
    """
    pinned = variant and variant != "auto" and variant_origin
    if pinned and source.kind == "wheel" and not source.fetched_by and source.variant != variant:
        # the user's own file: not a fallback of pip's, but a conflict with the pin
        path = shlex.quote(str(source.location))
        ways = [f"fdl libtorch install --from-wheel {path} --name {source.variant}"]
        if variant == "cpu":
            ways.insert(0, f"fdl libtorch install --from-wheel {path} --cpu")
        raise UsageError(
            f"the wheel is torch {source.version} (the {source.variant} build), but the "
            f"project pins the {variant} build (libtorch.variant at {variant_origin}): "
            "nothing was installed",
            hint=(
                (f"its CPU view, the pinned build: {ways[0]}; or " if variant == "cpu" else "")
                + f"the {source.variant} build as it is, beside the pin: {ways[-1]} (or change "
                f"libtorch.variant at {variant_origin})"
            ),
        )
    asked = []
    if torch and not (
        source.torch_version == torch or source.torch_version.startswith(torch.rstrip(".") + ".")
    ):
        asked.append((f"torch {torch}", f"torch {source.torch_version}"))
    found = _INDEX_VARIANT.search(index_url.strip()) if index_url else None
    wanted = variant if variant and variant != "auto" else found.group(1) if found else None
    if wanted and source.variant != wanted:
        asked.append((f"the {wanted} build", f"the {source.variant} build"))
    if not asked:
        return
    what = " and ".join(a for a, _ in asked)
    got = ", ".join(g for _, g in asked)
    where = f" from {source.fetched_by}" if source.fetched_by else ""
    hint = (
        "pip may have fallen back to another index when the one asked for could not be "
        "reached: check it (pip's output with -v), or install the wheel file itself "
        "(fdl libtorch install --from-wheel FILE.whl)"
        if source.fetched_by
        else "pass a wheel of that build"
    )
    if wanted == "cpu" and source.kind == "wheel":  # not a Python environment's torch
        how = "--cpu --torch VERSION" if source.fetched_by else "FILE.whl --cpu"
        hint += f"; or its CPU view: fdl libtorch install --from-wheel {how}"
    raise UsageError(
        f"the wheel is {source.version} ({got}){where}, not {what}: nothing was installed",
        hint=hint,
    )


def _from_texts(kind: str, location: Path, metadata: str, version_py: str) -> WheelSource:
    headers = parse_metadata(metadata)
    if (headers.name or "").lower() != "torch":
        raise UsageError(
            f"{location} is not a PyTorch wheel (its name is {headers.name!r})",
            hint="pass a torch-<version>-...whl file",
        )
    values = parse_version_py(version_py)
    source = WheelSource(
        kind=kind,
        location=location,
        version=str(headers.version or values.get("__version__") or ""),
        cuda=values.get("cuda") or None,
        git_version=values.get("git_version"),
        requires=headers.requires,
    )
    _check_facts(source)
    return source


def _check_facts(source: WheelSource) -> None:
    """The version, CUDA and commit the variant records and writes (``build-version``),
    held against their grammars where they are read."""
    hint = (
        "reinstall torch in that environment with pip"
        if source.kind == "environment"
        else "pass a torch wheel downloaded from PyPI or download.pytorch.org"
    )
    check_wheel_facts(
        source.version, source.cuda, source.git_version, source=str(source.location), hint=hint
    )


def _metadata_member(path: Path) -> str:
    """The wheel's ``<name>-<version>.dist-info/METADATA`` member (from the zip's index)."""
    with zipfile.ZipFile(path) as archive:
        found = dist_info_member(archive.namelist(), "METADATA")
    return found or "METADATA"  # read_member then names what is missing


def wheel_from_file(path: Path) -> WheelSource:
    """Read a torch ``.whl`` (its METADATA and ``torch/version.py``).

    Raises:
        UsageError: not a file, not a wheel, or not a torch wheel.
    """
    if not path.is_file():
        raise UsageError(f"{path}: no such wheel file", hint="pass the path of a torch .whl file")
    try:
        metadata = read_member(path, _metadata_member(path))
        version_py = read_member(path, "torch/version.py")
    except (ArchiveError, zipfile.BadZipFile, OSError) as exc:
        why = exc.message if isinstance(exc, ArchiveError) else str(exc)
        raise UsageError(
            f"{path} is not a readable torch wheel: {why}",
            hint="pass a torch-<version>-...whl file downloaded from PyPI",
        ) from None
    # bytes that are not UTF-8 are no exit 70: the grammars then refuse what they spell
    metadata_text, version_text = (b.decode("utf-8", "replace") for b in (metadata, version_py))
    return _from_texts("wheel", path, metadata_text, version_text)


_FIND_TORCH = (
    "import importlib.util, json, sys\n"
    "spec = importlib.util.find_spec('torch')\n"
    "where = list(spec.submodule_search_locations or []) if spec else []\n"
    "print(json.dumps({'torch': where[0] if where else None, 'python': sys.executable}))\n"
)


def wheel_from_environment(python: str, runner: Runner, *, timeout: float = 60) -> WheelSource:
    """The torch installed in the environment of ``python`` (found without importing it).

    Raises:
        UsageError: that Python has no torch.
    """
    result = runner.run([python, "-c", _FIND_TORCH], timeout=timeout, max_output=1 << 16)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    if not found.get("torch"):
        raise UsageError(
            f"{python} has no torch installed",
            hint=f"install it (`{python} -m pip install torch`) or pass a .whl file",
        )
    torch_dir = Path(found["torch"])
    infos = sorted(torch_dir.parent.glob("torch-*.dist-info/METADATA"))
    if not infos:
        raise EnvironmentProblem(
            f"no torch-*.dist-info beside {torch_dir}: cannot tell which torch it is",
            hint="reinstall torch with pip in that environment",
        )
    from fdl._files import NotARegularFile, read_text_file, reason_of

    try:  # regular files only, bounded: a FIFO or /dev/zero there never hangs fdl
        version_py = read_text_file(torch_dir / "version.py")
        metadata = read_text_file(infos[-1])
    except (NotARegularFile, OSError) as exc:
        where = exc.path if isinstance(exc, NotARegularFile) else exc.filename or torch_dir
        raise EnvironmentProblem(
            f"{where}: {reason_of(exc)}: cannot tell which torch {python} has",
            hint=f"reinstall torch in that environment (`{python} -m pip install --force-reinstall torch`)",
        ) from None
    source = _from_texts("environment", torch_dir, metadata, version_py)
    source.extra["python"] = python
    return source


def installed_torch(
    environ: Mapping[str, str], runner: Runner, *, own: str | None = None
) -> WheelSource | None:
    """The torch installed for the Python a user works in, if any: ``$VIRTUAL_ENV``'s,
    ``$CONDA_PREFIX``'s, ``python3`` on PATH, then fdl's own (``own``). Found without
    importing torch (about 30 ms a Python); a Python that fails or has none is skipped."""
    candidates = [
        *(
            str(Path(environ[k]) / "bin" / "python")
            for k in ("VIRTUAL_ENV", "CONDA_PREFIX")
            if environ.get(k)
        ),
        shutil.which("python3", path=environ.get("PATH")) or "",
        own or "",
    ]
    seen: set[str] = set()
    for python in candidates:
        if not python or python in seen or not Path(python).is_file():
            continue
        seen.add(python)
        try:
            return wheel_from_environment(python, runner, timeout=10)
        except (FdlError, OSError, ValueError, IndexError):
            continue
    return None


def wheel_from_pip(version: str, dest: Path, pip: Pip) -> WheelSource:
    """``pip download torch==VERSION --no-deps`` into ``dest`` and read the wheel.

    Raises:
        NetworkError: pip could not reach the index (exit 5).
        EnvironmentProblem: a pip constraint of the environment excludes it (exit 4).
        CommandFailed: pip could not find or fetch it otherwise.
    """
    spec = f"torch=={version}"
    result = pip.download([spec], dest, what=f"torch {version}", options=["--no-deps"])
    wheels = [p for p in pip_saved_files(result.stdout) if p.name.startswith("torch-")]
    if not wheels:
        wheels = sorted(dest.glob(f"torch-{version}*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise EnvironmentProblem(
            f"pip reported success but no torch {version} wheel is in {dest}",
            hint="run the pip command by hand to see what it fetched",
        )
    found = wheel_from_file(wheels[-1])
    index = f" --index-url {pip.index_url}" if pip.index_url else ""
    command = f"pip download {spec} --no-deps{index}"
    return WheelSource(
        found.kind,
        found.location,
        found.version,
        found.cuda,
        found.git_version,
        found.requires,
        fetched_by=command,
    )


def wheel_source(
    *,
    cache: Path,
    runner: Runner,
    wheel: Path | None = None,
    python: str | None = None,
    torch: str | None = None,
    index_url: str | None = None,
    on_message: LineCallback | None = None,
    on_line: LineCallback | None = None,
) -> WheelSource:
    """The wheel to install: a ``.whl`` file, a Python environment's torch, or pip's download.

    Args:
        cache: Where ``pip download`` puts wheels (``<cache>/wheels``).
        runner: Runs the environment's Python or pip.
        wheel: A ``.whl`` file (first choice).
        python: A Python whose installed torch is copied (second choice).
        torch: The torch version pip downloads (``2.13`` or ``2.13.0``; None: the newest
            known release).
        index_url: A PyPI mirror for pip.
        on_message: Told what is being done.
        on_line: Gets pip's output.

    Raises:
        UsageError: an unusable wheel or environment.
    """
    if wheel is not None:
        return wheel_from_file(Path(os.path.expanduser(wheel)))
    if python is not None:
        return wheel_from_environment(python, runner)
    exact = torch if torch and torch.count(".") >= 2 else resolve_torch_version(torch)
    _check_index_variant(exact, index_url)
    if on_message is not None:
        on_message(f"pip download torch=={exact} --no-deps")
    return wheel_from_pip(exact, cache, Pip(sys.executable, runner, index_url, on_line))


def _check_index_variant(version: str, index_url: str | None) -> None:
    """An index of download.pytorch.org's form (``.../whl/cu129``) for a build the release
    does not publish as a wheel: refused before pip runs (pip would fall back to another
    index, or fail with "no matching distribution"). Wheel-only builds are known."""
    from fdl.compat import wheel_variant_problem

    variant = None if index_url and "/nightly/" in index_url else index_variant(index_url)
    problem = wheel_variant_problem(version, variant) if variant else None
    if problem is not None:
        raise UsageError(
            f"{problem}: nothing was downloaded",
            hint="pass an index of one of them (https://download.pytorch.org/whl/<variant>)",
        )


def install_wheel(
    context: Context,
    source: WheelSource,
    *,
    cache: Path,
    runner: Runner,
    name: str | None = None,
    force: bool = False,
    nvidia: bool = True,
    index_url: str | None = None,
    activate: bool = True,
    on_message: LineCallback | None = None,
    on_line: LineCallback | None = None,
) -> InstallResult:
    """Install ``source`` as ``precompiled/<name or variant>`` (atomically, under the lock).

    An existing variant of the same build is kept; one of another build is replaced only
    with ``force``.

    Args:
        context: The libtorch root.
        source: From :func:`wheel_source`.
        cache: Where the NVIDIA wheels pip fetches are kept.
        runner: Runs pip.
        name: Variant name under ``precompiled/`` (default: the wheel's variant, ``cu130``).
        force: Replace a different build (or a directory fdl did not make).
        nvidia: Bring the NVIDIA libraries a CUDA wheel needs into ``lib/``.
        index_url: A PyPI mirror for pip.
        activate: Make it the active variant.
        on_message: Told what is being done and when another process holds the lock.
        on_line: Gets pip's output and per-wheel progress.

    Raises:
        UsageError: the variant holds another libtorch build and ``force`` is not set.
    """
    options = NvidiaOptions(bundle=nvidia, python=sys.executable, cache=cache, index_url=index_url)
    return install_source(
        context,
        FromWheel(source, runner, options, on_message, on_line),
        name=f"precompiled/{name}" if name else None,
        force=force,
        activate=activate,
        on_wait=on_message,
    )
