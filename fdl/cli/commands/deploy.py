"""``fdl deploy``: the train image on a SLURM or Kubernetes target, placed by arch."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fdl.cli.commands._common import JsonOption, group, visible_devices

app = group(
    "deploy",
    "Submit the train image to a target of the manifest's deploy: section (SLURM or "
    "Kubernetes), by digest, refused where its libtorch binaries cannot run.\n\n"
    "Example: fdl deploy submit lab",
    no_args_is_help=True,
)

TargetArg = Annotated[str | None, typer.Argument(help="The target (default: the only one).")]
JobOption = Annotated[
    str | None,
    typer.Option(
        "--job",
        help="A job fdl recorded for the target (default: the last one submitted); "
        "every submitted job keeps its record under .fdl/deploy/jobs/.",
    ),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print what would be pushed and submitted; run nothing.")
]


def _session(ctx: typer.Context) -> Any:
    return ctx.obj


def _visible(session: Any) -> tuple[int, ...] | None:
    """floDl's global ``fdl --gpus SPEC deploy ...``: the devices the job's programs and its
    probe see, within the GPUs the job gets (None: all)."""
    return visible_devices(session.options.gpus)


@app.command()
def render(ctx: typer.Context, target: TargetArg = None, as_json: JsonOption = False) -> None:
    """Print the target's sbatch script or Kubernetes YAML, the image named by the tag
    `submit` would push (submit pins the digest the push returns). Refuses a target whose
    GPUs the image cannot use.

    Example: fdl deploy render lab > lab.sbatch
    """
    from fdl.deploy import prepare

    session = _session(ctx)
    plan = prepare(session.manifest(), target, visible=_visible(session)).plan()
    if as_json:
        session.console.json(plan.to_json())
    else:
        session.console.out(plan.text, end="")
        if plan.gpus:
            session.console.info(plan.gpus)
        session.console.info(
            f"the image is named by its tag {plan.image}: nothing is pushed yet; "
            f"`fdl deploy submit {plan.target.name}` pushes it and submits it by the digest "
            "the push returns"
        )
    raise typer.Exit(0)


@app.command()
def submit(
    ctx: typer.Context,
    target: TargetArg = None,
    dry_run: DryRunOption = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Stay until the job ends: print its output, exit 0 when it completed, "
            "1 otherwise (for scripts and fdl bench). Ctrl-C cancels the job.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build the train image (an unchanged project is all BuildKit cache), push it to the
    target's registry, resolve its digest and submit (sbatch --parsable / the Kubernetes
    API); placement is judged from the built image's labels. The job is recorded for
    status/logs/cancel.

    Example: fdl deploy submit lab --wait
    """
    from fdl.deploy import check_registry, job_completed, prepare, state_dir, submit_target
    from fdl.engine import default_engine
    from fdl.runner import default_runner

    session = _session(ctx)
    manifest = session.manifest()
    prepared = prepare(manifest, target, visible=_visible(session))
    plan = prepared.plan()  # placement by the manifest first: refused before any build
    if dry_run:
        check_registry(prepared)  # what submit would refuse, refused here too
        if as_json:
            session.console.json({**plan.to_json(), "dry_run": True})
        else:
            for text in plan.warnings:
                session.console.warn(text)
            if plan.gpus:
                session.console.info(plan.gpus)
            if prepared.target.registry is None:
                where = (
                    f"would build {plan.local_image} and run it from this host's image store "
                    "by its ID (no registry: nothing is pushed)"
                )
            else:
                layers = plan.to_json()["compression"]
                where = (
                    f"would build {plan.local_image} and push it as {plan.remote} ({layers} "
                    "layers), then submit it by the digest the push returns"
                )
            session.console.info(where)
            session.console.out(plan.text, end="")
        raise typer.Exit(0)
    done = submit_target(
        prepared,
        state_dir(manifest),
        engine=default_engine(),
        runner=default_runner(),
        environ=session.environ,
        info=session.console.info,
        warn=session.console.warn,
    )
    plan, record = done.plan, done.record
    if not as_json:
        session.console.info(
            f"submitted {record.kind} job {record.job_id} to {record.target} ({plan.image})"
        )
    context = prepared.target.context
    state = _wait(session, record, context, quiet=as_json) if wait else None
    if as_json:
        session.console.json({**plan.to_json(), "job": record.to_json(), "state": state})
    raise typer.Exit(0 if state is None or job_completed(record, state) else 1)


def _wait(session: Any, record: Any, context: str | None, *, quiet: bool) -> str:
    """Follow the job to its end, its output on stdout; return its final state.

    Ctrl-C (or SIGTERM: a bench round that timed out) while waiting cancels the job, so
    nothing keeps running that nobody watches; it says so, or, when the cancel fails, that
    the job goes on and how to cancel it.
    """
    from fdl.errors import Interrupted, Terminated

    try:
        return _follow(session, record, context, quiet=quiet)
    except (KeyboardInterrupt, Interrupted, Terminated):
        _cancel_abandoned(session, record, context)
        raise


def _cancel_abandoned(session: Any, record: Any, context: str | None) -> None:
    import signal

    from fdl.deploy import cancel_of
    from fdl.errors import FdlError

    where = f"{record.kind} job {record.job_id} of {record.target}"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: let it finish
    try:
        ended = cancel_of(record, context=context)
    except (FdlError, OSError) as exc:
        session.console.error(
            f"stopped waiting; {where} keeps running (cancelling it failed: {exc}); "
            f"cancel it: fdl deploy cancel {record.target} --job {record.job_id}"
        )
        return
    finally:
        signal.signal(signal.SIGINT, previous)
    if ended is None:
        session.console.error(
            f"stopped waiting: cancelled {where} (submit without --wait, then "
            f"`fdl deploy logs {record.target} -f`, to keep a job running you stop watching)"
        )
    else:
        session.console.error(f"stopped waiting; {where} had already ended ({ended})")


def _follow(session: Any, record: Any, context: str | None, *, quiet: bool) -> str:
    from fdl.deploy import follow_job, job_completed

    def show(line: str) -> None:
        if not quiet:
            session.console.out(line)

    state = follow_job(record, show, context=context)
    if not job_completed(record, state):
        session.console.error(f"job {record.job_id} on {record.target} ended {state}")
    return str(state)


def _record(
    ctx: typer.Context, target: str | None, job: str | None = None
) -> tuple[Any, Any, str | None]:
    from fdl.deploy import load_target, read_record, state_dir

    session = _session(ctx)
    manifest = session.manifest()
    loaded = load_target(manifest, target)
    return session, read_record(state_dir(manifest), loaded.name, job), loaded.context


@app.command()
def status(
    ctx: typer.Context, target: TargetArg = None, job: JobOption = None, as_json: JsonOption = False
) -> None:
    """The state of the job last submitted to the target (PENDING and why, RUNNING,
    COMPLETED...).

    Example: fdl deploy status lab --json
    """
    from fdl.deploy import job_status_of

    session, record, context = _record(ctx, target, job)
    found = job_status_of(record, context=context)
    if as_json:
        session.console.json(
            {**record.to_json(), "state": found.state, "reason": found.reason, "note": found.note}
        )
    else:
        why = f" ({found.reason})" if found.reason else ""
        session.console.out(f"{record.target}: job {record.job_id} {found.state}{why}")
        if found.note:
            session.console.info(found.note)
    raise typer.Exit(0)


@app.command()
def logs(
    ctx: typer.Context,
    target: TargetArg = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Until the job ends.")] = False,
    job: JobOption = None,
) -> None:
    """Print the output of the job last submitted to the target (streamed, a line at a time).

    Example: fdl deploy logs lab -f
    """
    from fdl.deploy import logs_of

    session, record, context = _record(ctx, target, job)
    for line in logs_of(record, follow=follow, context=context):
        session.console.out(line)
    raise typer.Exit(0)


@app.command()
def cancel(
    ctx: typer.Context,
    target: TargetArg = None,
    job: JobOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Cancel the job last submitted to the target (scancel / delete the Job). With docker
    or podman on SLURM the job script stops the container as the step ends.

    Example: fdl deploy cancel lab
    """
    from fdl.deploy import cancel_of

    session, record, context = _record(ctx, target, job)
    ended = None if dry_run else cancel_of(record, context=context)
    if as_json:
        session.console.json(
            {**record.to_json(), "cancelled": not dry_run and ended is None, "ended": ended}
        )
    elif ended is not None:
        session.console.info(
            f"{record.kind} job {record.job_id} of {record.target} had already ended "
            f"({ended}); nothing to cancel"
        )
    else:
        verb = "would cancel" if dry_run else "cancelled"
        session.console.info(f"{verb} {record.kind} job {record.job_id} of {record.target}")
    raise typer.Exit(0)
