"""What ``submit`` records of a job, whatever its backend: the record kept under
``<project>/.fdl/deploy/`` and the state a backend reports."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from fdl._files import atomic_write_text

__all__ = ["JobFile", "JobRecord", "JobStatus", "record_path", "write_record"]


@dataclass(frozen=True)
class JobFile:
    """A rendered job to submit: its ``text``, kept as ``filename`` in the state directory,
    the job's name, and what its record names as the job's ``image``."""

    text: str
    filename: str
    job_name: str
    image: str


@dataclass(frozen=True)
class JobRecord:
    """What ``submit`` recorded under ``<project>/.fdl/deploy/<target>.json``.

    ``kind`` is the backend's name, or its name, ``-`` and a form of job it submits
    (``kubernetes-jobset``); ``output`` is where the job's output is (SLURM: the output
    file; Kubernetes: the namespace).
    """

    target: str
    kind: str
    job_id: str
    image: str
    script: str
    output: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class JobStatus:
    """A job's state, and why it is in it.

    Attributes:
        state: The backend's name (SLURM: PENDING, RUNNING, COMPLETED, ...; Kubernetes:
            Pending, Running, Complete, Failed), or UNKNOWN.
        reason: Why it waits (squeue's ``%r``: Resources, Priority, ...), or None.
        note: What UNKNOWN means here, or None.
    """

    state: str
    reason: str | None = None
    note: str | None = None


def record_path(state_dir: Path, target: str, job_id: str | None = None) -> Path:
    """The last job's record (``<target>.json``), or one job's (``jobs/<target>-<id>.json``)."""
    if job_id is None:
        return state_dir / f"{target}.json"
    return state_dir / "jobs" / f"{target}-{job_id}.json"


def write_record(state_dir: Path, record: JobRecord) -> None:
    """Keep ``record`` as its job's own file and as the target's last job.

    Every job keeps its record: two submits at once each leave theirs, and a job the
    target's last record no longer names stays reachable (``--job ID``).
    """
    text = json.dumps(record.to_json(), indent=2) + "\n"
    own = record_path(state_dir, record.target, record.job_id)
    own.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(own, text)
    atomic_write_text(record_path(state_dir, record.target), text)
