"""A recorded job's status, logs and cancellation, whatever its kind."""

from __future__ import annotations

from collections.abc import Iterator

from fdl.deploy._kube_exec import kube_cancel, kube_logs, kube_state
from fdl.deploy._slurm_exec import JobRecord, JobStatus, cancel_job, follow_output, job_status
from fdl.runner import Runner, default_runner

__all__ = ["cancel_of", "job_state_of", "job_status_of", "logs_of"]


def job_status_of(
    record: JobRecord, runner: Runner | None = None, context: str | None = None
) -> JobStatus:
    """The job's state, with SLURM's pending reason and what UNKNOWN means."""
    if record.kind.startswith("kubernetes"):
        return JobStatus(kube_state(record, context))
    return job_status(record, runner or default_runner())


def job_state_of(
    record: JobRecord, runner: Runner | None = None, context: str | None = None
) -> str:
    return job_status_of(record, runner, context).state


def logs_of(
    record: JobRecord,
    *,
    follow: bool = False,
    runner: Runner | None = None,
    context: str | None = None,
) -> Iterator[str]:
    if record.kind.startswith("kubernetes"):
        return kube_logs(record, context)
    return follow_output(record, runner or default_runner(), follow=follow)


def cancel_of(
    record: JobRecord, runner: Runner | None = None, context: str | None = None
) -> str | None:
    """Cancel the job; None when it was cancelled, else the state it had already ended in."""
    if record.kind.startswith("kubernetes"):
        return kube_cancel(record, context)
    return cancel_job(record, runner or default_runner())
