"""``fdl probe``: is this machine ready for a long training job? (floDl 0.8's gate)"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group, visible_devices
from fdl.errors import ExitCode

if TYPE_CHECKING:
    from fdl.diagnose.probe import ProbeReport
    from fdl.libtorch.variants import VariantInfo
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
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="The job runs in this image (what an fdl deploy job passes): its libtorch is "
            "the one --variant, --cuda and --archs describe (the image's dev.fdl.* labels), "
            "and NCCL comes inside it (the host is not scanned).",
        ),
    ] = None,
    variant: Annotated[
        str | None, typer.Option("--variant", help="With --image: its libtorch variant.")
    ] = None,
    cuda: Annotated[
        str | None, typer.Option("--cuda", help="With --image: its libtorch's CUDA (none: CPU).")
    ] = None,
    archs: Annotated[
        str | None,
        typer.Option(
            "--archs", help="With --image: the code its libtorch holds (sm_90 compute_120)."
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
    given = _image_libtorch(image, variant, cuda, archs)
    found = survey(session.environ)
    masked = _visible(found, _masks(session))
    path, info = libtorch_path, None
    if given is not None:
        path, info, docker = Path(f"image:{image}"), given, image
    elif path is None:
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
        image=image,
    )
    report = plan_probe(facts)
    if as_json:
        session.console.json(report.to_json())
    else:
        session.console.out(_render(report))
    if not report.ready:
        raise typer.Exit(int(ExitCode.FAILURE))


def _image_libtorch(
    image: str | None, variant: str | None, cuda: str | None, archs: str | None
) -> VariantInfo | None:
    """The libtorch of the job's image as ``--variant/--cuda/--archs`` say it, or None
    without ``--image``.

    Raises:
        UsageError: one of them without --image, --image without --variant, an arch or a
            CUDA version that is not one.
    """
    import re

    from fdl.compat import parse_archs
    from fdl.errors import UsageError
    from fdl.libtorch.variants import VariantInfo

    if image is None:
        if variant or cuda or archs:
            raise UsageError(
                "--variant, --cuda and --archs describe the libtorch of an --image",
                hint="fdl probe --image REF --variant precompiled/cu130 --cuda 13.0 --archs sm_90",
            )
        return None
    if not variant or not variant.isprintable():
        raise UsageError(
            "--image needs --variant: the image's libtorch variant (its dev.fdl.variant label)",
            hint=f"fdl probe --image {image} --variant precompiled/cu130 --cuda 13.0 --archs sm_90",
        )
    if cuda not in (None, "none") and not re.fullmatch(r"[0-9]+\.[0-9]+", cuda):
        raise UsageError(f"--cuda {cuda!r} is not a CUDA version", hint="e.g. --cuda 13.0")
    codes = (archs or "").split()
    if codes:
        parse_archs(codes)  # refuses what is not an arch, naming it
    return VariantInfo(
        name=variant,
        cuda=None if cuda in (None, "none") else cuda,
        archs_found={
            "cubin": [c for c in codes if c.startswith("sm_")],
            "ptx": [c for c in codes if c.startswith("compute_")],
        },
    )


def _masks(session: Session) -> Mapping[str, str]:
    """The visibility masks the probe honours: ``fdl --gpus SPEC probe`` sets both vendors'
    as it does for a project command, else the environment's."""
    environ = session.environ
    if session.options.gpus is None:
        return environ
    devices = visible_devices(session.options.gpus)
    if devices is None:  # all
        return {k: v for k, v in environ.items() if not k.endswith("_VISIBLE_DEVICES")}
    text = ",".join(str(i) for i in devices)
    return {**environ, "CUDA_VISIBLE_DEVICES": text, "HIP_VISIBLE_DEVICES": text}


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
    if report.facts.survey.amd_driver:
        lines.append(f"  amdgpu driver {printable(report.facts.survey.amd_driver)}")
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
        job = libtorch is not None and str(libtorch["path"]).startswith("image:")
        lines.append(
            f"  in the image{'' if job else ' of service'} {printable(nccl['via_docker'])} "
            "(host not scanned)"
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
