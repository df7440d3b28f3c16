"""A recorded job, whatever its backend: its record read back, its status, logs, wait and
cancellation (each asked of the backend that submitted it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from fdl._files import read_small_text, reason_of
from fdl.deploy._backend import BACKENDS, DeployBackend, backend, backend_of_record
from fdl.deploy._record import JobRecord, JobStatus, record_path
from fdl.errors import EnvironmentProblem, UsageError
from fdl.runner import Runner, default_runner

__all__ = [
    "cancel_of",
    "follow_job",
    "job_completed",
    "job_state_of",
    "job_status_of",
    "logs_of",
    "read_record",
]


def read_record(state_dir: Path, target: str, job_id: str | None = None) -> JobRecord:
    """The last job submitted to ``target`` (or its job ``job_id``).

    Raises:
        UsageError: nothing was submitted from this project (or no such job).
        EnvironmentProblem: the file is not a record fdl wrote.
    """
    if job_id is not None and not _any_job_id(job_id):
        raise UsageError(
            f"{job_id!r} is not a job id",
            hint=f"the ids fdl recorded for {target!r} are in {state_dir / 'jobs'}",
        )
    path = record_path(state_dir, target, job_id)
    try:
        text = read_small_text(path, limit=1 << 16)
        data = json.loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError) as exc:
        raise _not_a_record(path, target, reason_of(exc)) from None
    if text is None:
        if job_id is not None:
            raise UsageError(
                f"fdl recorded no job {job_id} of {target!r} in this project (no {path})",
                hint=f"the last one: fdl deploy status {target}",
            )
        raise UsageError(
            f"no job was submitted to {target!r} from this project (no {path})",
            hint=f"submit one: fdl deploy submit {target}",
        )
    fields = tuple(JobRecord.__dataclass_fields__)
    if not isinstance(data, dict):
        raise _not_a_record(path, target, "it is not a JSON object")
    missing = [key for key in fields if not isinstance(data.get(key), str)]
    if missing:
        raise _not_a_record(path, target, f"no text for {', '.join(missing)}")
    record = JobRecord(**{key: data[key] for key in fields})
    # What status and cancel pass to scancel or the API must be a job id fdl got back:
    # `scancel --user=me` from an edited record would cancel every job of the user.
    owner = backend_of_record(record.kind)
    if owner is None:
        raise _not_a_record(path, target, f"unknown kind {record.kind!r}")
    if not owner.record_ids[record.kind].fullmatch(record.job_id):
        raise _not_a_record(path, target, f"{record.job_id!r} is not a {record.kind} job id")
    if record.target != target or (job_id is not None and record.job_id != job_id):
        raise _not_a_record(path, target, f"it names job {record.job_id} of {record.target!r}")
    return record


def _any_job_id(job_id: str) -> bool:
    return any(
        form.fullmatch(job_id) for name in BACKENDS for form in backend(name).record_ids.values()
    )


def _not_a_record(path: Path, target: str, reason: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"{path} is not a record of a job fdl submitted to {target!r}: {reason}",
        hint=(
            "move it away (a job it named keeps running: squeue or kubectl get jobs finds "
            f"it), then `fdl deploy submit {target}` records a new one"
        ),
    )


def _owner(record: JobRecord) -> DeployBackend:
    owner = backend_of_record(record.kind)
    if owner is None:  # read_record refuses such a record; one made in code is a bug
        raise ValueError(f"no deploy backend writes records of kind {record.kind!r}")
    return owner


def job_status_of(
    record: JobRecord, runner: Runner | None = None, context: str | None = None
) -> JobStatus:
    """The job's state, with SLURM's pending reason and what UNKNOWN means."""
    return _owner(record).status(record, runner or default_runner(), context)


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
    return _owner(record).logs(record, runner or default_runner(), context, follow=follow)


def follow_job(
    record: JobRecord,
    on_line: Callable[[str], None],
    *,
    runner: Runner | None = None,
    context: str | None = None,
) -> str:
    """Stay until the job ends, its output to ``on_line``; return its final state."""
    return _owner(record).wait(record, runner or default_runner(), context, on_line)


def job_completed(record: JobRecord, state: str) -> bool:
    """Whether ``state`` is the state of a job of ``record``'s backend that completed."""
    return state == _owner(record).done


def cancel_of(
    record: JobRecord, runner: Runner | None = None, context: str | None = None
) -> str | None:
    """Cancel the job; None when it was cancelled, else the state it had already ended in."""
    return _owner(record).cancel(record, runner or default_runner(), context)
