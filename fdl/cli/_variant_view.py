"""``fdl libtorch list`` and ``fdl libtorch info``: the installed variants, without typer.

People and scripts ask these often, so :func:`try_fast_path` answers their plain forms
from the entry path (``fdl.cli.main``) before typer is imported, as ``config show`` is
answered; the typer commands in :mod:`fdl.cli.commands.libtorch` call the same two
actions, and tests/cli/test_fastpath.py holds both paths to the same output. Anything
else (``--help``, an unknown option, ``--``) goes through typer, which reports it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from fdl.cli._console import Console
    from fdl.cli._globals import GlobalOptions
    from fdl.cli._session import Session
    from fdl.libtorch import VariantInfo

__all__ = ["list_variants", "show_info", "try_fast_path"]


def list_variants(session: Session, *, as_json: bool) -> int:
    """Print the installed variants (the active one marked) as text or JSON."""
    from fdl.libtorch import variants

    context = session.libtorch_context()
    names = variants.list_variants(context)
    active = variants.active_name(context)
    infos = {n: variants.read_info(context.libtorch_dir / n, n) for n in names}
    if as_json:
        session.console.json(
            [variant_json(n, infos[n], n == active, context.libtorch_dir / n) for n in names]
        )
        return 0
    if not names:
        session.console.info(f"No libtorch variants installed in {context.label()}.")
        session.console.info("Run: fdl setup   (or: fdl libtorch download)")
    for name in names:
        info = infos[name]
        what = f"torch {info.torch or '?'}, {gpu_code(info)}"
        mark = "*" if name == active else " "
        session.console.out(f"{mark} {name:<28} {what}{'  (active)' if name == active else ''}")
    return 0


def show_info(session: Session, variant: str | None, *, as_json: bool) -> int:
    """Print what ``variant`` (default: the active one) is, as text or JSON.

    Raises:
        UsageError: no such variant, or none active when none is named.
    """
    from fdl.libtorch import variants

    context = session.libtorch_context()
    chosen = variants.installed_or_active(context, variant)
    path = context.libtorch_dir / chosen
    data = variants.read_info(path, chosen)
    active = variants.active_name(context) == chosen
    if as_json:
        session.console.json(variant_json(chosen, data, active, path))
    else:
        session.console.out(_render_info(chosen, data, active, path), end="")
    return 0


def try_fast_path(options: GlobalOptions, rest: list[str], console: Console) -> int | None:
    """Run ``libtorch list [--json]`` or ``libtorch info [VARIANT] [--json]`` directly;
    None for any other form (typer parses and reports those)."""
    if options.help or len(rest) < 2 or rest[0] != "libtorch" or rest[1] not in ("list", "info"):
        return None
    as_json = False
    variant: str | None = None
    for token in rest[2:]:
        if token == "--json":
            as_json = True
        elif rest[1] == "info" and variant is None and token and not token.startswith("-"):
            variant = token
        else:
            return None
    from fdl.cli._session import install

    session = install(options, console)
    if rest[1] == "list":
        return list_variants(session, as_json=as_json)
    return show_info(session, variant, as_json=as_json)


def variant_json(name: str, info: VariantInfo, active: bool, path: Path) -> dict[str, Any]:
    """One variant for ``--json`` output (the reference's keys first)."""
    return {
        "variant": name,
        "active": active,
        "path": str(path),
        **info.to_json(),
        "vendor": info.vendor,
        "rocm": info.rocm,
    }


def _built_from(source: dict[str, Any]) -> str:
    """How the pusher got the variant (``build, recipe docker``), without its paths."""
    details = [f"{key} {source[key]}" for key in ("recipe", "backend") if source.get(key)]
    return ", ".join([str(source.get("kind") or "unknown"), *details])


def gpu_code(info: VariantInfo) -> str:
    """``CUDA 12.8``, ``ROCm 7.0 (AMD)`` or ``CPU``: what the variant's GPU code is for."""
    if info.vendor == "amd":
        return f"ROCm {info.rocm} (AMD)" if info.rocm else "ROCm (AMD)"
    return f"CUDA {info.cuda}" if info.cuda else "CPU"


def _render_info(name: str, info: VariantInfo, active: bool, path: Path) -> str:
    from fdl.libtorch import describe_view

    found = info.archs_found
    archs = " ".join([*found.get("cubin", []), *found.get("ptx", []), *found.get("gfx", [])])
    archs = archs or (
        "none (CPU build)"
        if info.vendor == "cpu"
        else " ".join(info.archs_requested) or "not read yet (run fdl libtorch verify)"
    )
    source = info.source
    pulled = source.get("registry") if isinstance(source.get("registry"), dict) else None
    origin = (
        f"{pulled.get('reference')} (built by {_built_from(source)})"
        if pulled
        else source.get("url")
        or source.get("wheel")
        or source.get("environment")
        or source.get("recipe")
    )
    kind = "registry" if pulled else source.get("kind", "unknown")
    rows = [
        ("Variant", f"{name}{' (active)' if active else ''}"),
        ("Path", str(path)),
        ("Torch", info.torch or "unknown"),
        ("GPU code", gpu_code(info)),
        ("CUDA", info.cuda or "none"),
        ("cuDNN", info.cudnn or "-"),
        ("Archs", archs),
        ("Extra", " ".join(found.get("extra", [])) or "-"),
        ("ABI", info.abi or "unknown"),
        ("Source", f"{kind}{': ' + str(origin) if origin else ''}"),
        ("sha256", str(source.get("sha256") or source.get("wheel_sha256") or "-")),
        ("Installed", info.installed_at or "unknown"),
    ]
    view = describe_view(source, info.extra)
    if view:
        rows.insert(4, ("Build", f"{source.get('build_version')}: {view}"))
    return "\n".join(f"{key + ':':<11}{value}" for key, value in rows) + "\n"
