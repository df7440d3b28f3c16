"""Deploy backends: what a kind of target (``kind: slurm``, ``kind: kubernetes``) does,
behind one protocol, and the table that names them.

The rest of the package asks the target's backend and never its kind: checks before the
build (:meth:`DeployBackend.check`), how placement judges it (``lands_anywhere``), the
rendered job (:meth:`~DeployBackend.render`), its submission and the recorded job's
status, logs, wait and cancel. A backend is one module exporting ``BACKEND``; the table
maps the kind to that module, imported on first use (a SLURM deploy never loads the
Kubernetes one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

from fdl.deploy._record import JobFile, JobRecord, JobStatus
from fdl.deploy._target import DeployTarget, GpuOffer
from fdl.runner import Runner

__all__ = ["BACKENDS", "DeployBackend", "JobInputs", "backend", "backend_of_record"]

# kind -> the module whose BACKEND serves it. A record's kind is the backend's name,
# optionally followed by "-" and the form of job (kubernetes-jobset).
BACKENDS: dict[str, str] = {
    "slurm": "fdl.deploy._slurm_backend",
    "kubernetes": "fdl.deploy._kube_backend",
}


@dataclass(frozen=True)
class JobInputs:
    """What a job is rendered from: the image, the job's name, the image's entrypoint and
    default arguments (the target's own replace them), the profile's carried ``mounts``,
    the GPUs the image covers (``allowed``) and the readiness gate each node runs before
    training (``probe``; empty: none)."""

    image: str
    job_name: str
    entrypoint: list[str]
    args: list[str]
    mounts: tuple[str, ...]
    allowed: tuple[GpuOffer, ...]
    probe: tuple[str, ...]


class DeployBackend(Protocol):
    """One kind of deploy target.

    Attributes:
        name: The target's ``kind:``.
        suffix: The kept job file's suffix (``.sbatch``, ``.yaml``).
        lands_anywhere: A job may land on any GPU the target offers, so the image must
            cover all (SLURM); otherwise it is pinned to the covered ones (node affinity).
        carries_profile_mounts: The image profile's mounts go into the job (the nodes
            share the project's file system).
        done: The state of a job that completed.
        record_ids: Each record kind it writes, and the form of its job ids.
    """

    name: str
    suffix: str
    lands_anywhere: bool
    carries_profile_mounts: bool
    done: str
    record_ids: Mapping[str, re.Pattern[str]]

    def check_fields(self, manifest: Any, key: str, raw: Mapping[str, Any]) -> None:
        """Refuse a target field of another backend (``manifest.error`` at its line)."""

    def secret_fix(self, key: str, name: str) -> str:
        """How a secret in ``env:`` reaches the job instead."""

    def runs_local_images(self, target: DeployTarget) -> bool:
        """Whether the job can run an image of this host's store (no registry)."""

    def puller(self, target: DeployTarget) -> str:
        """What pulls the image (a row of ``fdl/data/compat/layers.yaml``)."""

    def visible_note(self, target: DeployTarget, spec: str) -> str:
        """What ``fdl --gpus SPEC`` does in this backend's jobs, in one sentence."""

    def check(self, target: DeployTarget, runner: Runner) -> list[str]:
        """Refuse what this host shows cannot work, before anything is built; return
        warnings about what it cannot see from here."""

    def render(self, target: DeployTarget, job: JobInputs) -> str:
        """The job as text (pure)."""

    def submit(
        self, target: DeployTarget, job: JobFile, state_dir: Path, runner: Runner
    ) -> JobRecord:
        """Submit the rendered job, keep it as ``job.filename`` and record it."""

    def status(self, record: JobRecord, runner: Runner, context: str | None) -> JobStatus:
        """The recorded job's state, and why."""

    def logs(
        self, record: JobRecord, runner: Runner, context: str | None, *, follow: bool
    ) -> Iterator[str]:
        """The job's output lines (with ``follow``, until it ends)."""

    def wait(
        self,
        record: JobRecord,
        runner: Runner,
        context: str | None,
        on_line: Callable[[str], None],
    ) -> str:
        """Stay until the job ends, its output to ``on_line``; its final state.

        By default its output followed (:meth:`logs` with ``follow``) and then its
        state (:meth:`status`); a backend whose output cannot be followed overrides it."""
        for line in self.logs(record, runner, context, follow=True):
            on_line(line)
        return self.status(record, runner, context).state

    def cancel(self, record: JobRecord, runner: Runner, context: str | None) -> str | None:
        """Cancel the job; None when it was cancelled, else the state it had ended in."""


def backend(kind: str) -> DeployBackend:
    """The backend of targets of ``kind`` (its module imported now).

    Raises:
        KeyError: no such backend (the manifest's schema admits only the table's kinds).
    """
    found: DeployBackend = import_module(BACKENDS[kind]).BACKEND
    return found


def backend_of_record(kind: str) -> DeployBackend | None:
    """The backend that wrote a record of ``kind``, or None for a kind none writes."""
    name = kind.partition("-")[0]
    if name not in BACKENDS:
        return None
    found = backend(name)
    return found if kind in found.record_ids else None
