"""Text renderings for ``fdl libtorch``, ``fdl diagnose`` and ``fdl setup`` (no typer)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from fdl.cli._console import Console

if TYPE_CHECKING:
    from fdl.diagnose import Check
    from fdl.libtorch import DownloadPlan, InstallResult, Selection, VariantInfo

__all__ = [
    "render_checks",
    "render_info",
    "render_install",
    "render_plan",
    "render_selection",
    "summary_line",
    "variant_json",
]

_STYLES = {"ok": ("green",), "info": ("dim",), "warning": ("yellow",), "error": ("red", "bold")}


def render_checks(console: Console, checks: Sequence[Check], *, show_ok: bool = True) -> str:
    """Checks grouped under their group names, one line each, fixes indented below."""
    lines: list[str] = []
    group = None
    for check in checks:
        if not show_ok and check.severity.value == "ok":
            continue
        if check.group != group:
            group = check.group
            if lines:
                lines.append("")
            lines.append(console.style(group, "bold"))
        label = console.style(f"{check.severity.value:<8}", *_STYLES[check.severity.value])
        text = check.message
        if not text.startswith(check.name):
            text = f"{check.name}: {text}"
        lines.append(f"  {label}{text}")
        if check.fix:
            lines.append(f"  {'':8}fix: {check.fix}")
    return "\n".join(lines) + "\n"


def summary_line(checks: Iterable[Check]) -> str:
    """``2 errors, 1 warning`` (or ``no problems``)."""
    from fdl.diagnose import count

    counts = count(checks)
    parts = []
    for key, word in (("error", "error"), ("warning", "warning")):
        if counts[key]:
            parts.append(f"{counts[key]} {word}{'s' if counts[key] != 1 else ''}")
    return ", ".join(parts) if parts else "no problems"


def render_selection(selection: Selection) -> list[str]:
    """Why this build, how each GPU runs it, what to do about the rest."""
    lines = [f"  why:      {selection.reason}"]
    for verdict in selection.verdicts:
        state = "ok" if verdict.ok else "NOT COVERED"
        lines.append(f"  {verdict.gpu.sm:<9} {state}: {verdict.reason}")
    lines += [f"  warning:  {w}" for w in selection.warnings]
    return lines


def render_plan(plan: DownloadPlan, *, dry_run: bool) -> str:
    """The download plan as shown before (or instead of, with --dry-run) the download."""
    selection = plan.selection
    what = f"CUDA {selection.cuda}" if selection.cuda else "CPU"
    lines = [
        f"libtorch {selection.torch_version} ({selection.variant}, {what})",
        f"  variant:  {plan.target.name or '(outside the variant root)'}",
        f"  url:      {plan.url}",
    ]
    if plan.mirror:
        lines.append(f"  upstream: {plan.upstream_url}")
    lines += [f"  target:   {plan.target.path}", *render_selection(selection)]
    lines += [f"  note:     {n}" for n in plan.notes]
    if dry_run:
        activation = "activate it" if plan.activate else "leave the active variant as it is"
        lines.append(
            f"[dry-run] would download, check build-version {selection.build_version}, "
            f"extract and {activation}"
        )
    return "\n".join(lines) + "\n"


def variant_json(name: str, info: VariantInfo, active: bool, path: str) -> dict[str, Any]:
    """One variant for ``--json`` output (the reference's keys first)."""
    return {"variant": name, "active": active, "path": path, **info.to_json()}


def render_info(name: str, info: VariantInfo, active: bool, path: str) -> str:
    """``fdl libtorch info``: what a variant is and where it came from."""
    found = info.archs_found
    archs = " ".join([*found.get("cubin", []), *found.get("ptx", [])]) or (
        "none (CPU build)" if not info.cuda else "not read yet (run fdl libtorch verify)"
    )
    source = info.source
    origin = (
        source.get("url")
        or source.get("wheel")
        or source.get("environment")
        or source.get("recipe")
    )
    rows = [
        ("Variant", f"{name}{' (active)' if active else ''}"),
        ("Path", path),
        ("Torch", info.torch or "unknown"),
        ("CUDA", info.cuda or "none (CPU)"),
        ("cuDNN", info.cudnn or "-"),
        ("Archs", archs),
        ("Extra", " ".join(found.get("extra", [])) or "-"),
        ("ABI", info.abi or "unknown"),
        ("Source", f"{source.get('kind', 'unknown')}{': ' + str(origin) if origin else ''}"),
        ("sha256", str(source.get("sha256") or "-")),
        ("Installed", info.installed_at or "unknown"),
    ]
    return "\n".join(f"{key + ':':<11}{value}" for key, value in rows) + "\n"


def render_install(result: InstallResult) -> list[str]:
    """Messages after an install: what is where, whether it is active, how to use it."""
    target = result.target
    where = target.name or str(target.path)
    info = result.info
    lines = []
    if not result.installed:
        lines.append(f"{where}: libtorch {info.torch} already installed")
    else:
        found = " ".join(info.archs_found.get("cubin", [])) or "none (CPU build)"
        version = info.torch or "(version unknown)"
        lines.append(f"installed {where}: libtorch {version}, cubins {found}")
        if result.replaced:
            lines.append(f"  (replaced libtorch {result.replaced})")
    if result.activated:
        lines.append(f"active variant: {target.name}")
    elif target.name is None:
        lines.append(
            f"use it with: export LIBTORCH={target.path} "
            f"LD_LIBRARY_PATH={target.path}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
        )
    verify = f"fdl libtorch verify {target.name} --cmake" if target.name else "(outside the root)"
    lines.append(f"check it with: {verify}")
    return lines
