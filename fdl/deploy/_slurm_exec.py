"""Running a SLURM plan: ``sbatch --parsable``, ``squeue``/``scontrol``/``sacct``, the
output file, ``scancel``. Every program runs through :class:`fdl.runner.Runner`."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from fdl._files import atomic_write_text
from fdl.deploy._record import JobFile, JobRecord, JobStatus, write_record
from fdl.deploy._target import DeployTarget
from fdl.errors import CommandFailed, EnvironmentProblem, UsageError
from fdl.locking import FileLock
from fdl.runner import Runner

__all__ = [
    "FINISHED",
    "JOB_ID",
    "cancel_job",
    "follow_output",
    "job_state",
    "job_status",
    "submit_script",
]

# Job states after which nothing more happens (squeue/scontrol/sacct names).
FINISHED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)

# SLURM's job ids: ``123``, an array task ``123_4``, a heterogeneous component ``123+1``.
JOB_ID = re.compile(r"[0-9]+(?:[_+][0-9]+)?")


# sbatch's messages a user can fix, and the fix.
_SBATCH_ERRORS = (
    (
        re.compile(r"invalid partition", re.I),
        "partition",
        "set `partition:` to one that `sinfo -s` lists",
    ),
    (
        re.compile(r"invalid generic resource|gres", re.I),
        "gres",
        "set `gpu-type:`/`gpus[].type` to a type the cluster's gres.conf names "
        "(`sinfo -o '%P %G'`), or drop gpu-type to ask with --gpus-per-node",
    ),
    (
        re.compile(r"invalid account", re.I),
        "account",
        "set `account:` to one of `sacctmgr show assoc user=$USER`",
    ),
    (re.compile(r"invalid qos", re.I), "qos", "set `qos:` to one your account may use"),
    (
        re.compile(r"node configuration is not available|more processors than permitted", re.I),
        "resources",
        "ask for fewer nodes, tasks, CPUs or memory than the partition's nodes have (`sinfo -N -l`)",
    ),
    (re.compile(r"time limit", re.I), "time", "lower `time:` below the partition's MaxTime"),
)


def _sbatch_error(exc: CommandFailed, target: DeployTarget, cluster: str = "") -> Exception:
    text = (exc.details or "").strip()
    reason = text.splitlines()[-1] if text else exc.message
    for pattern, what, fix in _SBATCH_ERRORS:
        if pattern.search(text):
            return UsageError(
                f"SLURM refused the job of target {target.name!r} ({what}): {reason}",
                hint=f"{fix} (at {target.origin}){cluster}",
            )
    return exc


def _cluster_nodes(runner: Runner, partition: str | None) -> str:
    """What the partition's nodes offer, for the hint of a request they cannot meet."""
    argv = ["sinfo", "-h", "-N", "-o", "%N %c %m %G"] + (["-p", partition] if partition else [])
    done = runner.run(argv, check=False)
    lines = sorted(set(done.stdout.split("\n"))) if done.ok else []
    nodes = [line.split() for line in lines if len(line.split()) == 4]
    if not nodes:
        return ""
    shown = "; ".join(
        f"{name}: {cpus} CPUs, {memory} MB" + (f", gres {gres}" if gres != "(null)" else "")
        for name, cpus, memory, gres in nodes[:4]
    )
    more = f" and {len(nodes) - 4} more" if len(nodes) > 4 else ""
    return f"; the cluster has {len(nodes)} node(s): {shown}{more}"


def submit_script(target: DeployTarget, job: JobFile, state_dir: Path, runner: Runner) -> JobRecord:
    """Ask SLURM whether it can ever run the job (``sbatch --test-only``), submit the
    sbatch script ``job.text`` of ``target``, record it. One submit per target at a time (a
    lock beside the records), and every job keeps its own record (:func:`write_record`);
    ``job.image`` is what the record names as the job's image.

    Raises:
        EnvironmentProblem: sbatch is not installed.
        UsageError: SLURM refused a value of the target (partition, gres, more nodes or
            CPUs than the cluster has, ...), with its reason and the fix.
    """
    if runner.which("sbatch") is None:
        raise EnvironmentProblem(
            "`sbatch` was not found on PATH (fdl submits SLURM jobs from a login node)",
            hint="run fdl where the SLURM client tools are installed, or `fdl deploy render` "
            "and copy the script there",
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    name = target.name
    with FileLock(state_dir / f"{name}.lock", purpose=f"fdl deploy submit {name}"):
        script = state_dir / job.filename
        atomic_write_text(script, job.text, mode=0o600)  # the job's environment: private
        # A request no node can meet would be accepted and pend forever.
        try:
            runner.run(["sbatch", "--test-only", str(script)], cwd=state_dir)
        except CommandFailed as exc:
            raise _sbatch_error(exc, target, _cluster_nodes(runner, target.partition)) from None
        try:
            done = runner.run(["sbatch", "--parsable", str(script)], cwd=state_dir)
        except CommandFailed as exc:
            raise _sbatch_error(exc, target) from None
        job_id = done.stdout.strip().split(";", 1)[0]
        output = _output_file(runner, job_id) or str(
            state_dir / target.output.replace("%x", job.job_name).replace("%j", job_id)
        )
        record = JobRecord(name, "slurm", job_id, job.image, str(script), output)
        write_record(state_dir, record)
    return record


def _scontrol(runner: Runner, job_id: str) -> dict[str, str]:
    done = runner.run(["scontrol", "show", "job", "-o", job_id], check=False)
    if not done.ok:
        return {}
    fields: dict[str, str] = {}
    for word in done.stdout.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    return fields


def _output_file(runner: Runner, job_id: str) -> str | None:
    return _scontrol(runner, job_id).get("StdOut")


def job_status(record: JobRecord, runner: Runner) -> JobStatus:
    """The job's state: squeue while queued or running (with the pending reason), then
    scontrol (kept MinJobAge seconds), then sacct (when accounting is on); ``UNKNOWN``,
    with what it means, when none knows it."""
    done = runner.run(["squeue", "-h", "-j", record.job_id, "-o", "%T|%r"], check=False)
    if done.ok and done.stdout.strip():
        queued, _, reason = done.stdout.strip().splitlines()[0].partition("|")
        waiting = queued == "PENDING" and reason not in ("", "None")
        return JobStatus(queued, reason if waiting else None)
    state = _scontrol(runner, record.job_id).get("JobState")
    if state:
        return JobStatus(state)
    done = runner.run(["sacct", "-n", "-X", "-P", "-j", record.job_id, "-o", "State"], check=False)
    if done.ok and done.stdout.strip():
        return JobStatus(done.stdout.split()[0])
    accounting = "disabled" not in (done.stderr or "").lower() and done.ok
    why = (
        "sacct does not know it either"
        if accounting
        else "accounting is off on this cluster (AccountingStorageType=accounting_storage/none)"
    )
    return JobStatus(
        "UNKNOWN",
        note=f"job {record.job_id} has ended and left slurmctld's memory (MinJobAge), and "
        f"{why}: its end state is not known; its output is {record.output} "
        f"(fdl deploy logs {record.target} --job {record.job_id})",
    )


def job_state(record: JobRecord, runner: Runner) -> str:
    """The job's state name (:func:`job_status`)."""
    return job_status(record, runner).state


def cancel_job(record: JobRecord, runner: Runner) -> str | None:
    """``scancel`` the job; a job that already ended is left alone.

    Returns:
        None when the job was cancelled, else the state it had already ended in.
    """
    state = job_state(record, runner)
    if state in FINISHED or state == "UNKNOWN":
        return state
    runner.run(["scancel", record.job_id])
    return None


# A line longer than this is printed in pieces: the reader holds no more than one.
_LINE_LIMIT = 1 << 16
# A state read as UNKNOWN this many times in a row means the job is gone (one miss may be
# slurmctld busy).
_UNKNOWN_POLLS = 5


def follow_output(
    record: JobRecord,
    runner: Runner,
    *,
    follow: bool,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """The job's output lines, read a line at a time (a 3 GB log is streamed, never held);
    with ``follow``, until the job has finished, or SLURM has not known it for
    ``_UNKNOWN_POLLS`` polls in a row (it left slurmctld and accounting is off: following
    would never end)."""
    path = Path(record.output)
    position = 0
    unknown = 0
    while True:
        state = job_state(record, runner) if follow else "COMPLETED"
        unknown = unknown + 1 if state == "UNKNOWN" else 0
        finished = state in FINISHED or unknown >= _UNKNOWN_POLLS
        if path.is_file():
            with path.open("rb") as handle:
                handle.seek(position)
                for line in iter(lambda: handle.readline(_LINE_LIMIT), b""):
                    complete = line.endswith(b"\n") or len(line) == _LINE_LIMIT
                    if not complete and not finished:
                        break  # a line still being written: the next round reads it whole
                    position += len(line)
                    yield line.rstrip(b"\r\n").decode(errors="replace")
        if finished:
            return
        sleep(poll)
