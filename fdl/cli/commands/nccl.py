"""``fdl nccl``: an NCCL with code for every GPU of the rig (floDl 0.8's ``fdl nccl build``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, ShowPlanOption, group

if TYPE_CHECKING:
    from fdl.nccl import NcclPlan

app = group(
    "nccl",
    "NCCL for the mixed rig: build NVIDIA's NCCL for the GPUs here, matched to the libtorch."
    '\n\nExample: fdl nccl build --archs "6.1;12.0" --dry-run',
    no_args_is_help=True,
)


@app.callback()
def _group() -> None:
    """A group (``build`` now; typer would otherwise make its one command the group)."""


@app.command()
def build(
    ctx: typer.Context,
    tag: Annotated[
        str | None,
        typer.Option(
            "--tag",
            help="NCCL git tag (v2.27.5-1); default: the version in the active libtorch's "
            "libtorch_cuda.so, else the NCCL wheel its torch pins.",
        ),
    ] = None,
    archs: Annotated[
        str | None,
        typer.Option("--archs", help='GPU archs ("6.1;12.0"); default: the NVIDIA GPUs here.'),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", help="Parallel compile jobs (default: the CPUs).")
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="An NCCL source tree here, or a git URL (default: NVIDIA's github).",
        ),
    ] = None,
    base_image: Annotated[
        str | None,
        typer.Option(
            "--base-image",
            help="The builder's base image (default: nvidia/cuda devel of the variant's CUDA).",
        ),
    ] = None,
    dry_run: ShowPlanOption = False,
    as_json: JsonOption = False,
) -> None:
    """Build libnccl from NVIDIA's source in Docker for the rig's GPU archs, at the NCCL
    version the active libtorch carries; install it under libtorch/nccl/builds/, where
    project commands (LD_PRELOAD) and fdl probe find it.

    Example: fdl nccl build --archs "6.1;12.0"
    """
    from fdl.nccl import NcclRequest, build_nccl, gather_facts, plan_nccl_build
    from fdl.paths import cache_dir

    session: Session = ctx.obj
    if source is not None and "://" not in source:
        from pathlib import Path

        source = str(Path(source).absolute())  # the plan names the tree wherever it is read
    request = NcclRequest(tag=tag, archs=archs, jobs=jobs, source=source, base_image=base_image)
    facts = gather_facts(request, session.libtorch_context(), session.environ)
    plan = plan_nccl_build(request, facts)
    if dry_run:
        if as_json:
            session.console.json(plan.to_json())
        else:
            session.console.out(_render(plan, planned=True))
        return
    if not as_json:
        session.console.out(_render(plan, planned=False))
    from fdl.cli._progress import ProgressLine

    log_file = cache_dir(session.environ) / "nccl" / "logs" / f"{plan.output.name}.log"
    progress = ProgressLine(session.console, f"building NCCL {plan.tag}")

    def on_line(line: str) -> None:
        session.console.debug(line)
        progress.status(line.strip()[-100:])

    try:
        built = build_nccl(plan, log_file=log_file, on_line=on_line)
    except BaseException:
        progress.close()
        session.console.info(f"full log: {log_file}")
        raise
    progress.close(f"built NCCL {plan.tag}")
    if as_json:
        session.console.json({**plan.to_json(), "installed": str(built.path), "log": str(log_file)})
        return
    session.console.out(
        f"\nNCCL {plan.tag} installed: {built.path}\n"
        f"  code checked for: {' '.join(plan.archs)}\n"
        f"  commands of this project load it (LD_PRELOAD={built.library})"
        + (f" while {plan.variant} is active" if plan.variant else "")
        + "\n  check with: fdl probe\n"
    )


def _render(plan: NcclPlan, *, planned: bool) -> str:
    from fdl._text import printable

    lines = [
        f"NCCL source build{' (dry run: nothing runs)' if planned else ''}",
        f"  tag     : {plan.tag} (from {printable(plan.tag_from)})",
        f"  archs   : {' '.join(plan.archs)} (from {plan.archs_from})",
        f"  gencode : {plan.gencode}",
        f"  CUDA    : {plan.cuda} ({plan.base_image})",
        f"  source  : {printable(plan.source)} ({plan.source_kind})",
        f"  jobs    : {plan.jobs}",
        f"  output  : {printable(str(plan.output))}",
        f"  variant : {plan.variant or '(none active)'}",
    ]
    lines += [f"  note: {printable(n)}" for n in plan.notes]
    return "\n".join(lines) + "\n"
