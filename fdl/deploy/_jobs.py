"""A recorded job's status, logs and cancellation, whatever its kind."""

from __future__ import annotations

from collections.abc import Iterator

from fdl.deploy._kube_exec import kube_cancel, kube_logs, kube_state
from fdl.deploy._slurm_exec import JobRecord, cancel_job, follow_output, job_state
from fdl.runner import Runner, default_runner

__all__ = ["cancel_of", "job_state_of", "logs_of"]


def job_state_of(
    record: JobRecord, runner: Runner | None = None, context: str | None = None
) -> str:
    if record.kind.startswith("kubernetes"):
        return kube_state(record, context)
    return job_state(record, runner or default_runner())


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


def cancel_of(record: JobRecord, runner: Runner | None = None, context: str | None = None) -> None:
    if record.kind.startswith("kubernetes"):
        kube_cancel(record, context)
    else:
        cancel_job(record, runner or default_runner())
