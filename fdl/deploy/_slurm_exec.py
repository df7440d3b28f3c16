"""Running a SLURM plan: ``sbatch --parsable``, ``squeue``/``scontrol``/``sacct``, the
output file, ``scancel``. Every program runs through :class:`fdl.runner.Runner`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from fdl._files import atomic_write_text, read_small_text, reason_of
from fdl.deploy._plan import DeployPlan
from fdl.errors import CommandFailed, EnvironmentProblem, UsageError
from fdl.runner import Runner

__all__ = [
    "FINISHED",
    "JobRecord",
    "cancel_job",
    "follow_output",
    "job_state",
    "read_record",
    "submit_sbatch",
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


@dataclass(frozen=True)
class JobRecord:
    """What ``submit`` recorded under ``<project>/.fdl/deploy/<target>.json``."""

    target: str
    kind: str
    job_id: str
    image: str
    script: str
    output: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


# The kinds of recorded jobs and the form of their ids: SLURM's (``123``, an array task
# ``123_4``, a heterogeneous component ``123+1``), or the Kubernetes object's name.
_K8S_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
RECORD_KINDS = {
    "slurm": re.compile(r"[0-9]+(?:[_+][0-9]+)?"),
    "kubernetes": _K8S_NAME,
    "kubernetes-pytorchjob": _K8S_NAME,
    "kubernetes-jobset": _K8S_NAME,
}


def record_path(state_dir: Path, target: str) -> Path:
    return state_dir / f"{target}.json"


def read_record(state_dir: Path, target: str) -> JobRecord:
    """The last job submitted to ``target``.

    Raises:
        UsageError: nothing was submitted from this project.
    """
    path = record_path(state_dir, target)
    try:
        text = read_small_text(path, limit=1 << 16)
        data = json.loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError) as exc:
        raise _not_a_record(path, target, reason_of(exc)) from None
    if text is None:
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
    id_form = RECORD_KINDS.get(record.kind)
    if id_form is None:
        raise _not_a_record(path, target, f"unknown kind {record.kind!r}")
    if not id_form.fullmatch(record.job_id):
        raise _not_a_record(path, target, f"{record.job_id!r} is not a {record.kind} job id")
    return record


def _not_a_record(path: Path, target: str, reason: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"{path} is not a record of a job fdl submitted to {target!r}: {reason}",
        hint=(
            "move it away (a job it named keeps running: squeue or kubectl get jobs finds "
            f"it), then `fdl deploy submit {target}` records a new one"
        ),
    )


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


def _sbatch_error(exc: CommandFailed, plan: DeployPlan) -> Exception:
    text = (exc.details or "").strip()
    for pattern, what, fix in _SBATCH_ERRORS:
        if pattern.search(text):
            return UsageError(
                f"sbatch refused the job of target {plan.target.name!r} ({what}): "
                f"{text.splitlines()[-1] if text else exc.message}",
                hint=f"{fix} (at {plan.target.origin})",
            )
    return exc


def submit_sbatch(plan: DeployPlan, state_dir: Path, runner: Runner) -> JobRecord:
    """Write the script under ``state_dir``, submit it, record the job.

    Raises:
        EnvironmentProblem: sbatch is not installed.
        UsageError: sbatch refused a value of the target (partition, gres, ...), with the fix.
    """
    if runner.which("sbatch") is None:
        raise EnvironmentProblem(
            "`sbatch` was not found on PATH (fdl submits SLURM jobs from a login node)",
            hint="run fdl where the SLURM client tools are installed, or `fdl deploy render` "
            "and copy the script there",
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    script = state_dir / plan.filename
    atomic_write_text(script, plan.text, mode=0o600)  # the job's environment: private
    try:
        done = runner.run(["sbatch", "--parsable", str(script)], cwd=state_dir)
    except CommandFailed as exc:
        raise _sbatch_error(exc, plan) from None
    job_id = done.stdout.strip().split(";", 1)[0]
    output = _output_file(runner, job_id) or str(
        state_dir / plan.target.output.replace("%x", plan.job_name).replace("%j", job_id)
    )
    record = JobRecord(plan.target.name, "slurm", job_id, plan.image, str(script), output)
    atomic_write_text(
        record_path(state_dir, plan.target.name), json.dumps(record.to_json(), indent=2) + "\n"
    )
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


def job_state(record: JobRecord, runner: Runner) -> str:
    """The job's state: squeue while queued or running, then scontrol (kept MinJobAge
    seconds), then sacct (when accounting is on); ``UNKNOWN`` when none knows it."""
    done = runner.run(["squeue", "-h", "-j", record.job_id, "-o", "%T"], check=False)
    if done.ok and done.stdout.strip():
        return done.stdout.split()[0]
    state = _scontrol(runner, record.job_id).get("JobState")
    if state:
        return state
    done = runner.run(["sacct", "-n", "-X", "-P", "-j", record.job_id, "-o", "State"], check=False)
    if done.ok and done.stdout.strip():
        return done.stdout.split()[0]
    return "UNKNOWN"


def cancel_job(record: JobRecord, runner: Runner) -> None:
    """``scancel`` the job (a finished job is not an error)."""
    runner.run(["scancel", record.job_id])


def follow_output(
    record: JobRecord,
    runner: Runner,
    *,
    follow: bool,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """The job's output lines; with ``follow``, until the job has finished."""
    path = Path(record.output)
    position = 0
    while True:
        finished = not follow or job_state(record, runner) in FINISHED
        if path.is_file():
            with path.open("r", errors="replace") as handle:
                handle.seek(position)
                chunk = handle.read()
                position = handle.tell()
            yield from chunk.splitlines()
        if finished:
            return
        sleep(poll)
