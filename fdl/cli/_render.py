"""Text shared by several command groups: checks, variant choices, installs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fdl.cli._console import Console
from fdl.cli._progress import human_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.diagnose import Check
    from fdl.libtorch import InstallResult, Selection

# fdl.diagnose and the install machinery of fdl.libtorch are imported by the functions that
# render them: `fdl libtorch list|info` import this module and need neither.

__all__ = [
    "render_checks",
    "render_install",
    "render_selection",
    "report_install",
    "summary_line",
    "warn_unresolved",
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
    for key in ("error", "warning"):
        if counts[key]:
            parts.append(f"{counts[key]} {key}{'s' if counts[key] != 1 else ''}")
    return ", ".join(parts) if parts else "no problems"


def render_selection(selection: Selection) -> list[str]:
    """Why this build, how each GPU runs it, what to do about the rest."""
    lines = [f"  why:      {selection.reason}"]
    for verdict in selection.verdicts:
        state = "ok" if verdict.ok else "NOT COVERED"
        lines.append(f"  {verdict.gpu.sm:<9} {state}: {verdict.reason}")
    lines += [f"  warning:  {w}" for w in selection.warnings]
    return lines


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
        from fdl.libtorch import describe_view

        view = describe_view(info.source, info.extra)
        if view:
            lines.append(f"  {view}")
            lines.append(f"  {_view_cost(info.extra.get('cpu_view'))}")
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


def _view_cost(details: object) -> str:
    """What reading a CPU view cost, against the wheel's size."""
    data = details if isinstance(details, dict) else {}
    read, cached, size = (data.get(k) for k in ("bytes_read", "bytes_cached", "wheel_size"))
    text = f"read {human_bytes(int(read or 0))} from the index"
    if cached:
        text += f" ({human_bytes(int(cached))} more found in fdl's cache)"
    if size:
        text += f"; the whole wheel is {human_bytes(int(size))}, without its NVIDIA wheels"
    return text


def report_install(console: Console, result: InstallResult, *, as_json: bool) -> None:
    """An install's outcome as JSON on stdout or as messages, then its unresolved libraries."""
    if as_json:
        console.json(result.to_json())
    else:
        for line in render_install(result):
            console.info(line)
    warn_unresolved(console, result)


def warn_unresolved(console: Console, result: InstallResult) -> None:
    """Warn when a fresh variant's libraries need something it does not contain."""
    from fdl.libtorch import unresolved_libraries

    for check in unresolved_libraries(result):
        console.warn(check.message)
        if check.fix:
            console.line(f"  fix: {check.fix}")
