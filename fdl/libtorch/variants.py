"""The on-disk layout of libtorch variants, compatible with the reference CLI.

::

    <root>/libtorch/
      .active                      # "precompiled/cu128\n": the active variant
      precompiled/<name>/          # official archives and PyPI wheels
        lib/ include/ share/
        .arch                      # key=value, as the reference writes it
        variant.json               # what fdl knows: versions, archs found, source, sha256
      builds/<name>/               # source builds
      .locks/                      # inter-process locks for installs

A variant name is ``precompiled/<name>`` or ``builds/<name>``; anything else
(``..``, absolute paths, other folders) is refused before touching the disk.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from fdl._files import NotARegularFile, atomic_write_text, read_small_text
from fdl.errors import EnvironmentProblem, UsageError
from fdl.paths import Context

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:  # the locks, shutil and datetime: only where variants change
    from typing import Any

    from fdl.locking import WaitCallback

__all__ = [
    "KINDS",
    "VariantInfo",
    "activate",
    "active_name",
    "clear_active",
    "describe_view",
    "installed_or_active",
    "list_variants",
    "lock_file",
    "read_info",
    "remove",
    "resolve_installed",
    "validate_name",
    "variant_dir",
    "write_info",
]

KINDS = ("precompiled", "builds")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
# floDl's ROCm variant names: rocm70 (its directory), rocm7.0 (its .arch variant=)
_ROCM_NAME = re.compile(r"^rocm(\d{1,2}(?:\.\d{1,2})?)$")
ACTIVE_FILE = ".active"
# Room for fdl's own names beside a variant (.<name>.staging-XXXXXXXX) within NAME_MAX.
MAX_NAME_BYTES = 200
ARCH_FILE = ".arch"
INFO_FILE = "variant.json"
INFO_SCHEMA = 1


def validate_name(name: str) -> str:
    """``name`` normalised (``precompiled/cu128``), or UsageError.

    Raises:
        UsageError: not ``<kind>/<name>`` with kind precompiled or builds, or
            a name with path separators, ``..`` or other odd characters.
    """
    cleaned = name.strip().strip("/")
    kind, sep, rest = cleaned.partition("/")
    too_long = len(rest.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES
    if not sep or kind not in KINDS or too_long or not _NAME.match(rest) or rest in (".", ".."):
        shown = name if len(name) <= 80 else name[:77] + "..."
        raise UsageError(
            f"invalid libtorch variant name {shown!r}",
            hint="variants are named precompiled/<name> or builds/<name> (see `fdl libtorch "
            f"list`); a name is letters, digits and ._+- and at most {MAX_NAME_BYTES} bytes",
        )
    return f"{kind}/{rest}"


def variant_dir(context: Context, name: str) -> Path:
    """The directory of variant ``name`` (validated; need not exist)."""
    return context.libtorch_dir / validate_name(name)


def lock_file(context: Context, name: str) -> Path:
    """The lock file guarding variant ``name`` (installs and removals hold it)."""
    return context.libtorch_dir / ".locks" / (validate_name(name).replace("/", "-") + ".lock")


def list_variants(context: Context) -> list[str]:
    """Installed variants (those with a ``lib/`` directory), sorted."""
    found = []
    for kind in KINDS:
        base = context.libtorch_dir / kind
        if not base.is_dir():
            continue
        for child in base.iterdir():
            if child.is_dir() and (child / "lib").is_dir() and _NAME.match(child.name):
                found.append(f"{kind}/{child.name}")
    return sorted(found)


def active_name(context: Context) -> str | None:
    """The active variant, or None (missing/empty pointer, or pointing nowhere valid)."""
    pointer = context.libtorch_dir / ACTIVE_FILE
    try:
        text = (read_small_text(pointer, limit=4096) or "").strip()
    except NotARegularFile as exc:
        raise EnvironmentProblem(
            f"the active-variant pointer {pointer} {exc.reason}",
            hint=f"remove it (rm -r {pointer}) and choose a variant: fdl libtorch activate NAME",
        ) from None
    except OSError:
        return None
    if not text:
        return None
    try:
        return validate_name(text)
    except UsageError:
        return None


def resolve_installed(context: Context, name: str) -> str:
    """The installed variant ``name`` names: a full name (``builds/sm61-sm120``) or, when
    only one variant has it, a short one (``cu130`` for ``precompiled/cu130``).

    Raises:
        UsageError: an invalid name, a short name of several variants, or nothing installed
            by that name (with the installed ones).
    """
    cleaned = name.strip().strip("/")
    if "/" not in cleaned and cleaned:
        matches = [v for v in list_variants(context) if v.split("/", 1)[1] == cleaned]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UsageError(
                f"{cleaned!r} names {' and '.join(matches)}", hint="give the full name"
            )
    normalised = validate_name(name) if "/" in cleaned else None
    if normalised is not None and _is_variant(context.libtorch_dir / normalised):
        return normalised
    installed = ", ".join(list_variants(context)) or "none"
    if normalised is not None and (context.libtorch_dir / normalised).is_dir():
        raise _not_a_variant(context.libtorch_dir / normalised, normalised, installed)
    shown = normalised or (cleaned if len(cleaned) <= 80 else cleaned[:77] + "...")
    raise UsageError(
        f"libtorch variant {shown!r} is not installed under {context.libtorch_dir}",
        hint=f"installed variants: {installed}",
    )


def _is_variant(path: Path) -> bool:
    """An installed variant, as :func:`list_variants` counts them (a ``lib/`` directory), or
    a link to one (removing a link never touches what it points at)."""
    return path.is_symlink() or (path.is_dir() and (path / "lib").is_dir())


def _not_a_variant(path: Path, name: str, installed: str) -> UsageError:
    try:
        held = ", ".join(sorted(child.name for child in path.iterdir())[:5]) or "nothing"
    except OSError:
        held = "unreadable"
    return UsageError(
        f"{path} is not a libtorch variant (no lib/; it holds {held}): fdl removes, "
        f"activates and reads only variants, and never deletes what it did not make",
        hint=f"move it out of {path.parent} (or delete it yourself) if it is not fdl's; "
        f"installed variants: {installed}",
    )


def installed_or_active(context: Context, name: str | None) -> str:
    """The installed variant ``name`` names (see :func:`resolve_installed`); without a name,
    the active variant.

    Raises:
        UsageError: ``name`` names no installed variant.
        EnvironmentProblem: no name, and no variant is active.
    """
    if name:
        return resolve_installed(context, name)
    active = active_name(context)
    if active is None:
        raise EnvironmentProblem(
            f"no active libtorch variant in {context.label()}",
            hint="name one (fdl libtorch list), or install one: fdl setup / fdl libtorch download",
        )
    if not (context.libtorch_dir / active / "lib").is_dir():
        installed = list_variants(context)
        fix = (
            f"activate an installed one: fdl libtorch activate {installed[0]} (installed: "
            f"{', '.join(installed)})"
            if installed
            else "install one: fdl setup / fdl libtorch download"
        )
        raise EnvironmentProblem(
            f"the active libtorch variant {active!r} ({context.libtorch_dir / ACTIVE_FILE}) "
            f"is not installed: {context.libtorch_dir / active} holds no lib/",
            hint=fix,
        )
    return active


def activate(context: Context, name: str) -> str:
    """Make ``name`` the active variant (atomic write of ``.active``).

    Raises:
        UsageError: invalid name, or no such installed variant (with the list).
    """
    normalised = resolve_installed(context, name)
    if not (context.libtorch_dir / normalised / "lib").is_dir():
        installed = ", ".join(list_variants(context)) or "none"
        raise UsageError(
            f"libtorch variant {normalised!r} is not installed under {context.libtorch_dir}",
            hint=f"installed variants: {installed}",
        )
    atomic_write_text(context.libtorch_dir / ACTIVE_FILE, normalised + "\n")
    return normalised


def clear_active(context: Context) -> None:
    """Empty the ``.active`` pointer (no active variant)."""
    pointer = context.libtorch_dir / ACTIVE_FILE
    if pointer.exists():
        atomic_write_text(pointer, "")


def remove(
    context: Context,
    name: str,
    *,
    timeout: float | None = None,
    on_wait: WaitCallback | None = None,
) -> bool:
    """Delete an installed variant under its lock; returns True when it was the active one.

    An install of the same variant running in another process finishes first.

    Args:
        timeout: Seconds to wait for the lock (None: as long as it takes).
        on_wait: Told when another process holds the lock.

    Raises:
        UsageError: invalid name or not installed.
        LockBusy: the lock was not free within ``timeout``.
    """
    from fdl.locking import FileLock

    normalised = validate_name(name)
    lock = FileLock(
        lock_file(context, normalised),
        timeout=timeout,
        purpose=f"removing libtorch {normalised}",
        on_wait=on_wait,
    )
    with lock:
        return _remove_locked(context, normalised)


def _remove_locked(context: Context, normalised: str) -> bool:
    target = context.libtorch_dir / normalised
    if not _is_variant(target):
        installed = ", ".join(list_variants(context)) or "none"
        if target.is_dir():
            raise _not_a_variant(target, normalised, installed)
        raise UsageError(
            f"libtorch variant {normalised!r} is not installed",
            hint=f"installed variants: {installed}",
        )
    was_active = active_name(context) == normalised
    if target.is_symlink():
        # A variant linked in from elsewhere: remove the link, never what it points at.
        target.unlink()
        if was_active:
            clear_active(context)
        return was_active
    # Rename first so a crash never leaves a half-deleted variant that looks installed.
    trash = target.with_name(f".removing-{target.name}-{os.getpid()}")
    target.rename(trash)
    import shutil

    shutil.rmtree(trash, ignore_errors=True)
    if was_active:
        clear_active(context)
    return was_active


@dataclass
class VariantInfo:
    """What a variant contains and where it came from (``variant.json``).

    Attributes:
        name: ``precompiled/cu128``, ``builds/sm61-sm120``...
        torch: The PyTorch version (``2.13.0``).
        cuda: The CUDA version (``12.8``), None for CPU.
        cudnn: The cuDNN version, when known.
        archs_requested: Archs asked for (source builds) or documented (official).
        archs_found: What reading the binaries found: ``{"cubin": [...], "ptx": [...]}``.
        abi: ``cxx11`` or ``pre-cxx11``.
        source: ``{"kind": "archive"|"wheel"|"build"|..., "url"|"wheel"|"recipe": ...}``: the
            kind is the source's (:data:`fdl.libtorch.sources.KINDS`); an official zip
            recorded as ``download`` by fdl 0.5 and before reads as ``archive``.
        installed_at: ISO 8601 UTC time of the install.
        extra: Anything else worth keeping (build flags, toolchain, duration).
    """

    name: str
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    archs_requested: list[str] = field(default_factory=list)
    archs_found: dict[str, list[str]] = field(default_factory=dict)
    abi: str | None = None
    source: dict[str, Any] = field(default_factory=dict)
    installed_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": INFO_SCHEMA,
            "name": self.name,
            "torch": self.torch,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "archs_requested": self.archs_requested,
            "archs_found": self.archs_found,
            "abi": self.abi,
            "source": self.source,
            "installed_at": self.installed_at,
            "extra": self.extra,
        }

    @property
    def rocm(self) -> str | None:
        """The ROCm release of an AMD build (``7.0``): recorded at install, else read from
        its name as floDl names them (``rocm70``, ``rocm7.0``)."""
        recorded = self.extra.get("rocm")
        if isinstance(recorded, str) and recorded:
            return recorded
        found = _ROCM_NAME.match(self.name.rsplit("/", 1)[-1])
        if found is None:
            return None
        digits = found.group(1)
        return digits if "." in digits else f"{digits[0]}.{digits[1:]}"

    @property
    def vendor(self) -> str:
        """``amd``, ``nvidia`` or ``cpu``: what the variant's GPU code is for, by fdl's one
        rule (:func:`fdl.compat.vendors.vendor_of_variant`, from :mod:`fdl._vendors`): what the binaries or floDl's
        ``.arch`` recorded (gfx code objects, a ROCm release, a CUDA version), else the name
        as floDl's CLI reads it (``rocm*``/``gfx*`` AMD, ``cu*``/``sm*`` NVIDIA)."""
        from fdl._vendors import vendor_of_variant

        recorded = (
            self.cuda
            or self.archs_found
            or self.archs_requested
            or self.source
            or self.installed_at
            or self.extra
        )
        return vendor_of_variant(self.name, self.to_json() if recorded else None)

    def arch_file(self) -> str:
        """The reference CLI's ``.arch`` key=value text.

        Archs are written as the reference writes them (``6.1 12.0``), whatever form the
        metadata holds (``sm_61``), so the reference's own check keeps working.
        """
        kind = self.source.get("kind", "")
        # The reference knows two sources; a PyPI wheel is a precompiled build too.
        source = {"archive": "precompiled", "wheel": "precompiled", "build": "compiled"}.get(
            kind, kind or "unknown"
        )
        archs = _dotted(self.archs_found.get("cubin") or self.archs_requested)
        variant = self.name.split("/", 1)[-1]
        if self.vendor == "amd":  # as floDl writes a ROCm build's: the gfx list, rocm7.0
            archs = list(self.archs_found.get("gfx") or self.archs_requested)
            variant = f"rocm{self.rocm}" if self.rocm else variant
        lines = [
            f"cuda={self.cuda or 'none'}",
            f"torch={self.torch or ''}",
            f"archs={' '.join(archs) if archs else ('cpu' if not self.cuda else '')}",
            f"source={source}",
            f"variant={variant}",
        ]
        return "\n".join(lines) + "\n"


def _dotted(archs: list[str]) -> list[str]:
    """``["sm_61", "sm_90a"]`` -> ``["6.1", "9.0a"]`` (cubins only; unknown forms kept)."""
    from fdl.compat.archs import parse_archs

    try:
        parsed = parse_archs(" ".join(archs)) if archs else None
    except UsageError:
        return list(archs)
    if parsed is None:
        return []
    result: list[str] = []
    for target in parsed.cubins or parsed.targets:
        text = f"{target.capability}{target.suffix}"
        if text not in result:
            result.append(text)
    return result


def now_iso() -> str:
    """The current UTC time, ISO 8601, seconds precision."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_info(directory: Path, info: VariantInfo) -> None:
    """Write ``variant.json`` and ``.arch`` into a variant directory; the user info of
    every URL in them hidden (an index URL's token is never recorded, so never pushed)."""
    from fdl._text import public_url

    if not info.installed_at:
        info.installed_at = now_iso()
    text = json.dumps(info.to_json(), indent=2, sort_keys=True) + "\n"
    atomic_write_text(directory / INFO_FILE, public_url(text))
    atomic_write_text(directory / ARCH_FILE, public_url(info.arch_file()))


def _parse_arch_file(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _source(value: object) -> dict[str, Any]:
    """A recorded source, its kind in today's words (``download``, an official zip's kind
    up to fdl 0.5, is ``archive``)."""
    source = _mapping(value)
    if source.get("kind") == "download":
        source["kind"] = "archive"
    return source


def read_info(directory: Path, name: str) -> VariantInfo:
    """What is known about the variant in ``directory``.

    Reads ``variant.json`` when present, else the reference's ``.arch`` file,
    else only the name (a variant copied in by hand).
    """
    data = _json_object(directory / INFO_FILE)
    if data is not None:
        return VariantInfo(
            name=name,
            torch=_text(data.get("torch")),
            cuda=_text(data.get("cuda")),
            cudnn=_text(data.get("cudnn")),
            archs_requested=_texts(data.get("archs_requested")),
            archs_found={
                str(kind): _texts(found)
                for kind, found in _mapping(data.get("archs_found")).items()
                if kind in ("cubin", "ptx", "gfx")
            },
            abi=_text(data.get("abi")),
            source=_source(data.get("source")),
            installed_at=_text(data.get("installed_at")) or "",
            extra=_mapping(data.get("extra")),
        )
    arch_text = _small_text(directory / ARCH_FILE)
    if arch_text is not None:
        values = _parse_arch_file(arch_text)
        cuda = values.get("cuda")
        archs = [a for a in values.get("archs", "").split() if a and a != "cpu"]
        kind = {"precompiled": "archive", "compiled": "build"}.get(values.get("source", ""), "")
        rocm = _ROCM_NAME.match(values.get("variant", ""))
        return VariantInfo(
            name=name,
            torch=values.get("torch") or None,
            cuda=None if cuda in (None, "", "none") else cuda,
            archs_requested=archs,
            source={"kind": kind} if kind else {},
            extra={"rocm": rocm.group(1)} if rocm and "." in rocm.group(1) else {},
        )
    version = (_small_text(directory / "build-version") or "").strip()
    return VariantInfo(name=name, torch=version.split("+")[0] or None)


def _small_text(path: Path) -> str | None:
    """A metadata file's text; None when absent or not what fdl writes (a damaged variant
    shows as 'version unknown' rather than failing every command that lists it)."""
    try:
        return read_small_text(path, limit=16 << 20)
    except OSError:
        return None


def _json_object(path: Path) -> dict[str, Any] | None:
    text = _small_text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _text(value: object) -> str | None:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value) or None
    return None


def _texts(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [str(item) for item in value if isinstance(item, (str, int, float))]


def _mapping(value: object) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def describe_view(view_source: dict[str, Any], extra: dict[str, Any]) -> str | None:
    """One line on what a CPU view (``fdl libtorch install --from-wheel --cpu``) is, for
    ``info``, ``verify`` and the install's report; None for any other variant."""
    if view_source.get("view") != "cpu":
        return None
    cuda = view_source.get("wheel_cuda")
    details = extra.get("cpu_view") if isinstance(extra.get("cpu_view"), dict) else {}
    left = [str(n) for n in (details or {}).get("left_out", []) if isinstance(n, str)]
    if not cuda:
        return "the CPU libraries of a CPU wheel"
    main = [n for n in left if n.startswith("libtorch_cuda")] or left[:1]
    rest = len(left) - len(main)
    out = f"; left out: {', '.join(main)}" + (f" and {rest} more" if rest else "") if left else ""
    return (
        f"a CPU view of a CUDA {cuda} build: its CPU libraries and the NVIDIA runtime "
        f"libraries they load, without libtorch_cuda: runs on the CPU only{out}"
    )
