"""``fdl libtorch build --on TARGET``: the source build as a job on a deploy target.

The job's script is planned by :func:`fdl.deploy.plan_build_job`; this submits it, follows
its output, and pulls what it pushed (unless the job installed it where this machine sees
it, or ``--no-pull``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl.cli._render import report_install
from fdl.cli.commands._team import pull
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.cli._session import Session
    from fdl.deploy import BuildJob

__all__ = ["build_on"]


def build_on(
    session: Session,
    on: str,
    given: dict[str, tuple[Any, str]],
    registry: str | None,
    *,
    no_registry: bool,
    no_pull: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """``--on TARGET``: submit the build as a SLURM job, follow its output, pull its push."""
    import sys

    from fdl.deploy import load_target, plan_build_job, state_dir

    console = session.console
    manifest = session.manifest()
    target = load_target(manifest, on)
    if not registry:
        raise UsageError(
            f"--on {on}: the job pushes what it builds to the team's registry, and none is set",
            hint="set `libtorch.registry:` in fdl.yml (or $FDL_LIBTORCH_REGISTRY), e.g. "
            "libtorch.registry: 127.0.0.1:5000/team/libtorch",
        )
    states = state_dir(manifest)
    job = plan_build_job(
        target,
        given,
        registry=registry,
        state_dir=states,
        workdir=session.cwd,
        fdl=(sys.executable, "-m", "fdl"),
        no_registry=no_registry,
    )
    if dry_run:
        if as_json:
            console.json(job.to_json())
        else:
            console.out(
                f"libtorch source build on {target.name} (dry run: nothing is submitted)\n"
                f"  backend:   {job.backend}\n  registry:  {registry}\n"
                f"  answers:   {job.results}\n  script:"
            )
            console.out(job.text, end="")
        return
    _submit_and_follow(session, job, states, no_pull=no_pull, as_json=as_json, given=given)


def _submit_and_follow(
    session: Session,
    job: BuildJob,
    states: Path,
    *,
    no_pull: bool,
    as_json: bool,
    given: dict[str, tuple[Any, str]],
) -> None:
    from fdl.deploy import JobFile, follow_output, job_status, read_build_result, submit_script
    from fdl.errors import CommandFailed, Interrupted
    from fdl.runner import default_runner

    console = session.console
    runner = default_runner()
    name = job.target.name
    built = JobFile(job.text, job.filename, job.job_name, f"libtorch build -> {job.registry}")
    record = submit_script(job.target, built, states, runner)
    job_id = record.job_id
    answer = job.result_path(job_id)
    console.info(
        f"submitted SLURM job {job_id} to {name}: the libtorch build runs there; "
        f"following {record.output} (Ctrl-C stops following; the job goes on)"
    )
    try:
        for line in follow_output(record, runner, follow=True):
            console.info(line)
    except Interrupted:
        console.warn(
            f"stopped following; SLURM job {job_id} goes on on {name}. Follow it: "
            f"fdl deploy logs {name} -f --job {job_id}; end it: fdl deploy cancel {name} "
            f"--job {job_id}; when it is done, {answer} holds the pushed reference: "
            "fdl libtorch pull REFERENCE"
        )
        raise
    state = job_status(record, runner).state
    # UNKNOWN: the job left slurmctld's memory; the answer is written only on success.
    if state != "COMPLETED" and not (state == "UNKNOWN" and answer.is_file()):
        raise CommandFailed(
            ["sbatch", record.script],
            1,
            message=f"the build job {job_id} on {name} ended {state}; it pushed nothing",
            log_file=Path(record.output),
            hint=f"read its output (fdl deploy logs {name} --job {job_id}); fix what it says "
            f"and submit again: fdl libtorch build --on {name} (a docker build resumes from "
            "its cache on the same node)",
        )
    result = read_build_result(answer)
    summary = {"target": name, "job_id": job_id, "output": record.output, **result}
    reference = str(result["reference"])
    # The job installed the variant in the project's libtorch/: on a cluster that shares
    # the project's filesystem it is here already, and pulling it would copy it twice.
    here = _installed_here(result.get("path"))
    if no_pull or here is not None:
        if as_json:
            console.json({**summary, "pulled": None, "installed_here": here is not None})
            return
        where = f"; installed here by the job: {here}" if here else ""
        console.out(f"built on {name} by job {job_id}, pushed {reference}{where}")
        if here is None:
            console.out(f"pull it: fdl libtorch pull {reference}")
        return
    activate = bool(given.get("activate", (True, ""))[0])
    pulled = pull(session, reference, activate=activate)
    if as_json:
        console.json({**summary, "pulled": pulled.to_json(), "installed_here": False})
    else:
        console.info(f"built on {name} by job {job_id}, pushed {reference}")
        report_install(console, pulled.install, as_json=False)


def _installed_here(path: object) -> Path | None:
    """The job's variant, when this machine sees it where the job installed it."""
    if not isinstance(path, str) or not path:
        return None
    tree = Path(path)
    return tree if (tree / "variant.json").is_file() else None
