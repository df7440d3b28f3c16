"""Running a Kubernetes plan through the ``kubernetes`` Python client (an optional
dependency, imported only here and only when a Kubernetes target is used)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fdl._files import atomic_write_text
from fdl.deploy._plan import DeployPlan
from fdl.deploy._slurm_exec import JobRecord, record_path
from fdl.errors import EnvironmentProblem

__all__ = ["kube_cancel", "kube_logs", "kube_state", "submit_kubernetes"]


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


# Kubeflow's PyTorchJob: (group, version, plural)
_PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")


def submit_kubernetes(plan: DeployPlan, state_dir: Path) -> JobRecord:
    """Create the plan's objects (Service first, then the Job) and record the job."""
    import yaml

    k8s = _client(plan.target.context)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / plan.filename
    atomic_write_text(path, plan.text)
    api = k8s.client.ApiClient()
    for obj in yaml.safe_load_all(plan.text):
        if not obj:
            continue
        if obj.get("kind") == "PyTorchJob":  # a custom resource: the typed helpers lack it
            k8s.client.CustomObjectsApi(api).create_namespaced_custom_object(
                *_PYTORCHJOB[:2], plan.target.namespace, _PYTORCHJOB[2], obj
            )
        else:
            k8s.utils.create_from_dict(api, obj, namespace=plan.target.namespace)
    kind = "kubernetes-pytorchjob" if plan.target.controller == "pytorchjob" else "kubernetes"
    record = JobRecord(
        plan.target.name, kind, plan.job_name, plan.image, str(path), plan.target.namespace
    )
    atomic_write_text(
        record_path(state_dir, plan.target.name), json.dumps(record.to_json(), indent=2) + "\n"
    )
    return record


def kube_state(record: JobRecord, context: str | None) -> str:
    """``Complete``, ``Failed``, ``Running`` (active pods) or ``Pending``."""
    k8s = _client(context)
    if record.kind == "kubernetes-pytorchjob":
        found = k8s.client.CustomObjectsApi().get_namespaced_custom_object(
            _PYTORCHJOB[0], _PYTORCHJOB[1], record.output, _PYTORCHJOB[2], record.job_id
        )
        conditions = (found.get("status") or {}).get("conditions") or []
        current = [c["type"] for c in conditions if c.get("status") == "True"]
        for state, shown in (
            ("Succeeded", "Complete"),
            ("Failed", "Failed"),
            ("Running", "Running"),
        ):
            if state in current:
                return shown
        return "Pending"
    job = k8s.client.BatchV1Api().read_namespaced_job_status(record.job_id, record.output)
    for condition in job.status.conditions or ():
        if condition.status == "True" and condition.type in ("Complete", "Failed"):
            return str(condition.type)
    return "Running" if job.status.active else "Pending"


def kube_logs(record: JobRecord, context: str | None) -> Iterator[str]:
    """Each pod's log, in pod-name order."""
    k8s = _client(context)
    core = k8s.client.CoreV1Api()
    label = (
        "training.kubeflow.org/job-name" if record.kind == "kubernetes-pytorchjob" else "job-name"
    )
    pods = core.list_namespaced_pod(record.output, label_selector=f"{label}={record.job_id}")
    for pod in sorted(pods.items, key=lambda p: p.metadata.name):
        yield from str(core.read_namespaced_pod_log(pod.metadata.name, record.output)).splitlines()


def kube_cancel(record: JobRecord, context: str | None) -> None:
    """Delete the Job (and its pods) and the headless Service, if any."""
    k8s = _client(context)
    body = k8s.client.V1DeleteOptions(propagation_policy="Background")
    if record.kind == "kubernetes-pytorchjob":  # the operator removes its pods and services
        k8s.client.CustomObjectsApi().delete_namespaced_custom_object(
            _PYTORCHJOB[0], _PYTORCHJOB[1], record.output, _PYTORCHJOB[2], record.job_id
        )
        return
    k8s.client.BatchV1Api().delete_namespaced_job(record.job_id, record.output, body=body)
    try:
        k8s.client.CoreV1Api().delete_namespaced_service(record.job_id, record.output)
    except k8s.client.exceptions.ApiException as exc:
        if exc.status != 404:
            raise
