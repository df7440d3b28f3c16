"""The Kubernetes executor through the real `kubernetes` client against a small fake API
server on loopback (no real cluster is available here). Its answers are built from the API's
own models (the official client's, kubeflow's for the PyTorchJob; metav1.Condition for the
JobSet's conditions), which refuse a missing required field, and serialized as the client
does (issue 46: they were written by hand); only the JobSet's replicatedJobsStatus has no
model in either client."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fdl.deploy import (
    DeployPlan,
    DeployTarget,
    GpuOffer,
    ImageArchs,
    cancel_of,
    job_state_of,
    logs_of,
    plan_deploy,
    submit_kubernetes,
)

pytest.importorskip("kubernetes")

from kubeflow.training import models as kubeflow
from kubernetes import client as k8s

CU130 = ImageArchs("precompiled/cu130", "13.0", ("sm_90", "compute_90"))


def _wire(model: object) -> Any:
    """A model as the API server sends it (camelCase keys, no unset fields)."""
    return k8s.ApiClient().sanitize_for_serialization(model)


def _condition(kind: str) -> k8s.V1Condition:
    """A metav1.Condition (the JobSet's), every required field set."""
    import datetime

    return k8s.V1Condition(
        type=kind, status="True", reason="AllJobsCompleted", message="jobset completed",
        last_transition_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    )  # fmt: skip


class FakeApi(BaseHTTPRequestHandler):
    """Just the endpoints fdl uses: create, read status, list pods, read log, delete."""

    objects: ClassVar[dict[str, dict[str, Any]]] = {}
    requests: ClassVar[list[tuple[str, str]]] = []
    complete = False
    probe_refused = False  # pods whose fdl-probe init container failed

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: Any, content: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.requests.append(("POST", self.path))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.objects[f"{body['kind']}/{body['metadata']['name']}"] = body
        self._send(201, body)

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path))
        path = self.path.split("?")[0]
        if "/pytorchjobs/" in path:
            job = dict(self.objects[f"PyTorchJob/{path.split('/')[-1]}"])
            state = "Succeeded" if self.complete else "Running"
            job["status"] = _wire(
                kubeflow.KubeflowOrgV1JobStatus(
                    conditions=[kubeflow.KubeflowOrgV1JobCondition(type=state, status="True")]
                )
            )
            self._send(200, job)
        elif "/jobsets/" in path:
            jobset = dict(self.objects[f"JobSet/{path.split('/')[-1]}"])
            jobset["status"] = (
                {"terminalState": "Completed", "conditions": [_wire(_condition("Completed"))]}
                if self.complete
                else {"replicatedJobsStatus": [
                    {"name": "train", "active": 1, "ready": 1, "failed": 0, "succeeded": 0,
                     "suspended": 0}]}
            )  # fmt: skip
            self._send(200, jobset)
        elif path.endswith("/status"):
            name = path.split("/")[-2]
            job = dict(self.objects[f"Job/{name}"])
            job["status"] = _wire(
                k8s.V1JobStatus(conditions=[k8s.V1JobCondition(type="Complete", status="True")])
                if self.complete
                else k8s.V1JobStatus(active=2)
            )
            self._send(200, job)
        elif path.endswith("/pods"):
            assert re.search(r"(job|jobset)-name(%3D|=)", self.path), self.path
            spec = None
            if self.probe_refused:
                spec = k8s.V1PodSpec(
                    init_containers=[k8s.V1Container(name="fdl-probe", image="fdl")],
                    containers=[k8s.V1Container(name="train", image="train")],
                )
            pods = [
                k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=f"pod-{i}"), spec=spec) for i in (1, 0)
            ]
            self._send(200, _wire(k8s.V1PodList(api_version="v1", kind="PodList", items=pods)))
        elif path.endswith("/log") and "container=fdl-probe" in self.path:
            self._send(
                200, "verdict: NOT READY (1 issue)\n  error: no code for GPU 0\n", "text/plain"
            )
        elif path.endswith("/log") and self.probe_refused:
            pod = path.split("/")[-2]
            why = f'container "train" in pod "{pod}" is waiting to start: PodInitializing'
            self._send(400, {"kind": "Status", "code": 400, "message": why})
        elif path.endswith("/log"):
            self._send(200, f"hello from {path.split('/')[-2]}\n", "text/plain")
        else:
            self._send(
                404,
                _wire(
                    k8s.V1Status(
                        api_version="v1", kind="Status", status="Failure", reason="NotFound",
                        code=404, message=f"the server could not find {path}",
                    )
                ),
            )  # fmt: skip

    def do_DELETE(self) -> None:
        self.requests.append(("DELETE", self.path))
        # The API answers with the object being deleted.
        parts = self.path.split("?")[0].split("/")
        kinds = {
            "jobs": "Job",
            "services": "Service",
            "pytorchjobs": "PyTorchJob",
            "jobsets": "JobSet",
        }
        kind = kinds[parts[-2]]
        self._send(200, self.objects.pop(f"{kind}/{parts[-1]}"))


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeApi]]:
    FakeApi.objects, FakeApi.requests, FakeApi.complete = {}, [], False
    FakeApi.probe_refused = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp_path / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "fake",
                        "cluster": {"server": f"http://127.0.0.1:{server.server_port}"},
                    }
                ],
                "users": [{"name": "me", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
                "current-context": "fake",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    yield FakeApi
    server.shutdown()
    server.server_close()


def _two_node_plan(name: str, controller: str = "job") -> DeployPlan:
    """The plan of a two-node H100 target of ``controller``, for the image by digest."""
    target = DeployTarget(
        name,
        "kubernetes",
        registry="ghcr.io/acme",
        namespace="ml",
        nodes=2,
        gpus_per_node=1,
        gpus=(GpuOffer("9.0", product="NVIDIA-H100-80GB-HBM3"),),
        controller=controller,
    )
    return plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=CU130,
        entrypoint=["/opt/app/bin/train"],
        args=[],
        digest="sha256:" + "c" * 64,
    )


def test_submit_status_logs_cancel_through_the_client(api: type[FakeApi], tmp_path: Path) -> None:
    plan = _two_node_plan("k8s")
    record = submit_kubernetes(plan, tmp_path)
    assert [r for r in api.requests if r[0] == "POST"] == [
        ("POST", "/api/v1/namespaces/ml/services"),
        ("POST", "/apis/batch/v1/namespaces/ml/jobs"),
    ]
    job = api.objects[f"Job/{plan.job_name}"]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == plan.image
    assert job_state_of(record) == "Running"
    api.complete = True
    assert job_state_of(record) == "Complete"
    assert list(logs_of(record)) == ["hello from pod-0", "hello from pod-1"]
    cancel_of(record)
    deletes = [r[1] for r in api.requests if r[0] == "DELETE"]
    assert deletes == [
        f"/apis/batch/v1/namespaces/ml/jobs/{plan.job_name}",
        f"/api/v1/namespaces/ml/services/{plan.job_name}",
    ]
    assert (tmp_path / "k8s.json").is_file() and (tmp_path / "k8s.yaml").is_file()


def test_without_the_client_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from fdl.deploy import JobRecord
    from fdl.errors import EnvironmentProblem

    monkeypatch.setitem(sys.modules, "kubernetes", None)
    record = JobRecord("k8s", "kubernetes", "job", "img", "f", "ml")
    with pytest.raises(EnvironmentProblem) as caught:
        job_state_of(record)
    assert "pip install kubernetes" in (caught.value.hint or "")


def test_a_pytorchjob_through_the_custom_objects_api(api: type[FakeApi], tmp_path: Path) -> None:
    plan = _two_node_plan("kf", "pytorchjob")
    record = submit_kubernetes(plan, tmp_path)
    assert record.kind == "kubernetes-pytorchjob"
    assert [r for r in api.requests if r[0] == "POST"] == [
        ("POST", "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs")
    ]
    job = api.objects[f"PyTorchJob/{plan.job_name}"]
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    assert job_state_of(record) == "Running"
    api.complete = True
    assert job_state_of(record) == "Complete"
    assert list(logs_of(record)) == ["hello from pod-0", "hello from pod-1"]
    pods = [r[1] for r in api.requests if r[1].startswith("/api/v1/namespaces/ml/pods?")]
    assert (
        "training.kubeflow.org%2Fjob-name" in pods[0] or "training.kubeflow.org/job-name" in pods[0]
    )
    cancel_of(record)
    assert [r[1] for r in api.requests if r[0] == "DELETE"] == [
        f"/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/{plan.job_name}"
    ]


def test_a_jobset_through_the_custom_objects_api(api: type[FakeApi], tmp_path: Path) -> None:
    plan = _two_node_plan("js", "jobset")
    record = submit_kubernetes(plan, tmp_path)
    assert record.kind == "kubernetes-jobset"
    assert [r for r in api.requests if r[0] == "POST"] == [
        ("POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets")
    ]
    jobset = api.objects[f"JobSet/{plan.job_name}"]
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["template"]["spec"]["containers"][0]["image"] == plan.image
    assert job_state_of(record) == "Running"
    api.complete = True
    assert job_state_of(record) == "Complete"
    assert list(logs_of(record)) == ["hello from pod-0", "hello from pod-1"]
    pods = [r[1] for r in api.requests if r[1].startswith("/api/v1/namespaces/ml/pods?")]
    assert (
        "jobset.sigs.k8s.io%2Fjobset-name" in pods[0] or "jobset.sigs.k8s.io/jobset-name" in pods[0]
    )
    cancel_of(record)
    assert [r[1] for r in api.requests if r[0] == "DELETE"] == [
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/{plan.job_name}"
    ]


def test_a_pod_the_probe_stopped_shows_the_probes_words(api: type[FakeApi], tmp_path: Path) -> None:
    plan = _two_node_plan("k8s")
    target = replace(plan.target, probe_image="ghcr.io/acme/fdl:0.9")
    plan = plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=CU130,
        entrypoint=["/opt/app/bin/train"],
        args=[],
        digest="sha256:" + "c" * 64,
    )
    record = submit_kubernetes(plan, tmp_path)
    pod = api.objects[f"Job/{plan.job_name}"]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["command"][:2] == ["fdl", "probe"]
    api.probe_refused = True
    assert list(logs_of(record)) == [
        "verdict: NOT READY (1 issue)",
        "  error: no code for GPU 0",
        "fdl: the training container of pod pod-0 did not start (fdl probe above)",
        "verdict: NOT READY (1 issue)",
        "  error: no code for GPU 0",
        "fdl: the training container of pod pod-1 did not start (fdl probe above)",
    ]
