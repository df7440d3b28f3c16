"""Running a Kubernetes plan through the ``kubernetes`` Python client (an optional
dependency, imported only here and only when a Kubernetes target is used)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fdl._files import atomic_write_text
from fdl.deploy._kube import PROBE_CONTAINER
from fdl.deploy._record import JobFile, JobRecord, write_record
from fdl.deploy._target import DeployTarget
from fdl.errors import EnvironmentProblem

__all__ = [
    "OBJECT_NAME",
    "RECORD_KINDS",
    "kube_cancel",
    "kube_check",
    "kube_logs",
    "kube_state",
    "kube_submit",
]


def _client(context: str | None) -> Any:
    from importlib import import_module

    try:
        # Untyped (and optional): held as Any.
        kubernetes: Any = import_module("kubernetes")
        import_module("kubernetes.config")
        import_module("kubernetes.utils")
    except ModuleNotFoundError:
        raise EnvironmentProblem(
            "Kubernetes targets need the `kubernetes` Python client, which is not installed",
            hint="pip install kubernetes (in the environment fdl runs from)",
        ) from None
    try:
        # $KUBECONFIG read now, not when the client was imported.
        kubernetes.config.load_kube_config(
            config_file=os.environ.get("KUBECONFIG"), context=context
        )
    except Exception as exc:  # the client raises ConfigException, TypeError, OSError...
        raise EnvironmentProblem(
            f"cannot load the kubeconfig{f' context {context!r}' if context else ''}: {exc}",
            hint="check ~/.kube/config (or $KUBECONFIG) and `context:` in the target",
        ) from None
    return kubernetes


# Custom resources fdl submits: kind -> (group, version, plural, the record's kind, the
# label its controller puts on the pods).
_CUSTOM = {
    "PyTorchJob": (
        "kubeflow.org", "v1", "pytorchjobs", "kubernetes-pytorchjob",
        "training.kubeflow.org/job-name",
    ),
    "JobSet": (
        "jobset.x-k8s.io", "v1alpha2", "jobsets", "kubernetes-jobset",
        "jobset.sigs.k8s.io/jobset-name",
    ),
}  # fmt: skip
_BY_RECORD = {entry[3]: entry for entry in _CUSTOM.values()}
# The record's kind by the target's controller, and the form of its job ids (the object's name).
_RECORD_KIND = {"pytorchjob": "kubernetes-pytorchjob", "jobset": "kubernetes-jobset"}
OBJECT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
RECORD_KINDS = ("kubernetes", *_RECORD_KIND.values())


def kube_check(context: str | None) -> None:
    """Load the client and the target's context, before anything is pushed.

    Raises:
        EnvironmentProblem: no ``kubernetes`` package, or no such context / kubeconfig.
    """
    _client(context)


def kube_submit(target: DeployTarget, job: JobFile, state_dir: Path) -> JobRecord:
    """Create the objects of ``job.text`` (Service first, then the Job) and record the job."""
    import yaml

    k8s = _client(target.context)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / job.filename
    atomic_write_text(path, job.text, mode=0o600)  # the job's environment: private
    api = k8s.client.ApiClient()
    for obj in yaml.safe_load_all(job.text):
        if not obj:
            continue
        custom = _CUSTOM.get(obj.get("kind", ""))
        if custom:  # a custom resource: the typed helpers lack it
            group, version, plural, kind, _ = custom
            k8s.client.CustomObjectsApi(api).create_namespaced_custom_object(
                group, version, target.namespace, plural, obj
            )
        else:
            k8s.utils.create_from_dict(api, obj, namespace=target.namespace)
    kind = _RECORD_KIND.get(target.controller, "kubernetes")
    record = JobRecord(target.name, kind, job.job_name, job.image, str(path), target.namespace)
    write_record(state_dir, record)
    return record


def kube_state(record: JobRecord, context: str | None) -> str:
    """``Complete``, ``Failed``, ``Running`` (active pods) or ``Pending``."""
    k8s = _client(context)
    custom = _BY_RECORD.get(record.kind)
    if custom:
        group, version, plural, _, _ = custom
        found = k8s.client.CustomObjectsApi().get_namespaced_custom_object(
            group, version, record.output, plural, record.job_id
        )
        return _custom_state(found.get("status") or {})
    job = k8s.client.BatchV1Api().read_namespaced_job_status(record.job_id, record.output)
    for condition in job.status.conditions or ():
        if condition.status == "True" and condition.type in ("Complete", "Failed"):
            return str(condition.type)
    return "Running" if job.status.active else "Pending"


def _custom_state(status: dict[str, Any]) -> str:
    """A PyTorchJob's or JobSet's state from its status (conditions, JobSet's terminalState
    and replicated Jobs' counts)."""
    current = {c.get("type") for c in status.get("conditions") or () if c.get("status") == "True"}
    terminal = status.get("terminalState")
    if terminal in ("Completed", "Failed"):
        current.add(terminal)
    for state, shown in (
        ("Succeeded", "Complete"),  # PyTorchJob
        ("Completed", "Complete"),  # JobSet
        ("Failed", "Failed"),
        ("Running", "Running"),
    ):
        if state in current:
            return shown
    if any(r.get("active") or r.get("ready") for r in status.get("replicatedJobsStatus") or ()):
        return "Running"
    return "Pending"


def kube_logs(record: JobRecord, context: str | None) -> Iterator[str]:
    """Each pod's log, in pod-name order: the readiness probe's (its init container) first,
    then the training container's (for a pod the probe stopped, a line saying it did not
    start)."""
    k8s = _client(context)
    core = k8s.client.CoreV1Api()
    custom = _BY_RECORD.get(record.kind)
    label = custom[4] if custom else "job-name"
    pods = core.list_namespaced_pod(record.output, label_selector=f"{label}={record.job_id}")
    for pod in sorted(pods.items, key=lambda p: p.metadata.name):
        name = pod.metadata.name
        inits = [c.name for c in (pod.spec.init_containers or ())] if pod.spec else []
        if PROBE_CONTAINER in inits:
            yield from _pod_log(core, name, record.output, PROBE_CONTAINER)
        try:
            yield from _pod_log(core, name, record.output, None)
        except k8s.client.exceptions.ApiException as exc:
            if exc.status != 400 or PROBE_CONTAINER not in inits:
                raise
            yield f"fdl: the training container of pod {name} did not start (fdl probe above)"


def _pod_log(core: Any, pod: str, namespace: str, container: str | None) -> Iterator[str]:
    # Streamed: a pod's log can be gigabytes; only a line (or 64 KiB of one) is held.
    given = {"container": container} if container else {}
    response = core.read_namespaced_pod_log(pod, namespace, _preload_content=False, **given)
    try:
        yield from _lines(response.stream(1 << 16))
    finally:
        response.release_conn()


def _lines(chunks: Iterator[bytes], limit: int = 1 << 16) -> Iterator[str]:
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.rstrip(b"\r").decode(errors="replace")
        while len(pending) >= limit:
            yield pending[:limit].decode(errors="replace")
            pending = pending[limit:]
    if pending:
        yield pending.decode(errors="replace")


def kube_cancel(record: JobRecord, context: str | None) -> str | None:
    """Delete the Job (and its pods) and the headless Service, if any.

    Returns:
        None when the job was running or pending, else the state it had ended in (its
        objects are deleted all the same).
    """
    state = kube_state(record, context)
    ended = state if state in ("Complete", "Failed") else None
    k8s = _client(context)
    body = k8s.client.V1DeleteOptions(propagation_policy="Background")
    custom = _BY_RECORD.get(record.kind)
    if custom:  # the controller removes what it created (pods, Jobs, services)
        group, version, plural, _, _ = custom
        k8s.client.CustomObjectsApi().delete_namespaced_custom_object(
            group, version, record.output, plural, record.job_id, body=body
        )
        return ended
    k8s.client.BatchV1Api().delete_namespaced_job(record.job_id, record.output, body=body)
    try:
        k8s.client.CoreV1Api().delete_namespaced_service(record.job_id, record.output)
    except k8s.client.exceptions.ApiException as exc:
        if exc.status != 404:
            raise
    return ended
