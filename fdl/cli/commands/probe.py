"""``fdl probe``: is this machine ready for a long training job? (floDl 0.8's gate)"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group
from fdl.errors import ExitCode

if TYPE_CHECKING:
    from fdl.diagnose.probe import ProbeReport
    from fdl.system.survey import Survey

app = group("probe")


@app.command()
def probe(
    ctx: typer.Context,
    as_json: JsonOption = False,
    skip_mount: Annotated[
        bool, typer.Option("--skip-mount", help="Do not check the shared data path.")
    ] = False,
    data_path: Annotated[
        str | None,
        typer.Option(
            "--data-path",
            help="The shared data path every node must see (default /flodl/data: missing "
            "is then a warning, not an error).",
        ),
    ] = None,
    libtorch_path: Annotated[
        Path | None,
        typer.Option("--libtorch-path", help="Probe this libtorch tree instead of the active one."),
    ] = None,
    docker: Annotated[
        str | None,
        typer.Option(
            "--docker", help="NCCL comes inside this compose service's image: skip the host scan."
        ),
    ] = None,
) -> None:
    """Check that the GPUs, the active libtorch, NCCL and the shared data path are ready
    for training; exit 1 when anything is not (a gate before a long job).

    Example: fdl probe --json --data-path /mnt/data
    """
    from fdl.diagnose.probe import gather, plan_probe
    from fdl.libtorch import variants
    from fdl.system.survey import survey

    session: Session = ctx.obj
    found = survey(session.environ)
    masked = _visible(found, session.environ)
    path, info = libtorch_path, None
    if path is None:
        context = session.libtorch_context()
        active = variants.active_name(context)
        if active is not None:
            path = context.libtorch_dir / active
            info = variants.read_info(path, active)
    elif path.is_dir():
        info = variants.read_info(path, path.name)
    facts = gather(
        survey=masked,
        libtorch_path=path,
        variant=info,
        environ=session.environ,
        data_path=data_path,
        skip_mount=skip_mount,
        via_docker=docker,
    )
    report = plan_probe(facts)
    if as_json:
        session.console.json(report.to_json())
    else:
        session.console.out(_render(report))
    if not report.ready:
        raise typer.Exit(int(ExitCode.FAILURE))


def _visible(found: Survey, environ: Mapping[str, str]) -> Survey:
    """The devices ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` leave (``--gpus``)."""
    from dataclasses import replace

    def allowed(vendor: str) -> set[int] | None:
        mask = environ.get("CUDA_VISIBLE_DEVICES" if vendor == "nvidia" else "HIP_VISIBLE_DEVICES")
        if mask is None:
            return None
        return {int(p) for p in mask.split(",") if p.strip().isdigit()}

    kept = []
    for device in found.devices:
        keep = allowed(device.vendor)
        if keep is None or device.index in keep:
            kept.append(device)
    return replace(found, devices=tuple(kept))


def _render(report: ProbeReport) -> str:
    from fdl._text import printable

    data = report.to_json()
    lines = [f"fdl probe: {printable(data['host'])}", ""]
    lines.append(f"GPUs ({len(data['gpus'])}):")
    for gpu in data["gpus"]:
        lines.append(
            f"  [{gpu['index']}] {printable(gpu['name'])}: {gpu['vendor']} {gpu['arch']}, "
            f"{gpu['vram_mb']} MB"
        )
    libtorch = data["libtorch"]
    lines += ["", "libtorch:"]
    if libtorch is None:
        lines.append("  (none active)")
    else:
        covered = sum(1 for m in libtorch["archs_match"] if m["covered"])
        lines += [
            f"  path  : {printable(libtorch['path'])}",
            f"  torch : {libtorch['torch'] or '?'} ({libtorch['vendor'] or '?'})",
            f"  archs : {libtorch['archs'] or '?'}",
            f"  match : {covered}/{len(libtorch['archs_match'])} GPUs covered",
        ]
    data_path = data["data_path"]
    lines += ["", "Shared data path:"]
    if data_path is None:
        lines.append("  (skipped: --skip-mount)")
    else:
        lines.append(
            f"  {printable(data_path['path'])}: exists {data_path['exists']}, readable "
            f"{data_path['readable']}, fs {data_path['fs_type'] or '?'}"
        )
    nccl = data["nccl"]
    lines += ["", "NCCL:"]
    if nccl is None:
        lines.append("  (no libnccl.so found, or no NVIDIA GPU)")
    elif nccl.get("via_docker"):
        lines.append(
            f"  in the image of service {printable(nccl['via_docker'])} (host not scanned)"
        )
    else:
        code = " ".join(nccl["cubins"] + nccl["ptx"]) or "no GPU code read"
        lines.append(f"  {printable(nccl['library_path'])} ({nccl['where']}): {code}")
    issues, warnings = data["issues"], data["warnings"]
    verdict = (
        "READY" if not issues else f"NOT READY ({len(issues)} issue{'s' * (len(issues) != 1)})"
    )
    lines += ["", f"verdict: {verdict}"]
    lines += [f"  error: {printable(m, limit=4000)}" for m in issues]
    lines += [f"  warning: {printable(m, limit=4000)}" for m in warnings]
    return "\n".join(lines) + "\n"
