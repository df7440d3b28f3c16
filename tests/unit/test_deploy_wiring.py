"""The Kubernetes wiring of a multi-node job, checked the way the cluster would make it
(issue 46): the pods an Indexed Job or a JobSet creates (their hostnames, labels, the
completion index), the headless Service that gives them DNS names only when its selector
matches their labels, and each pod's MASTER_ADDR, which must name the pod whose RANK is 0.

The rules are Kubernetes' own (Job, Service and JobSet documentation), written out below
from the docs, not from fdl's renderer: a Service selecting a label the pods lack, or a
MASTER_ADDR naming pod 1, fails here although every object is schema-valid."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from fdl.deploy import DeployTarget, GpuOffer, ImageArchs, plan_deploy

H100 = GpuOffer("9.0", type="h100", product="NVIDIA-H100-80GB-HBM3", driver="580.65")
CU130 = ImageArchs("precompiled/cu130", "13.0", ("sm_90", "compute_90"), "2.13.0")
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


@dataclass
class Pod:
    """A pod as the cluster runs it."""

    namespace: str
    hostname: str
    subdomain: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    container: dict[str, Any]

    def env(self, name: str) -> str:
        """The variable's value in the running container (values and downward-API fields)."""
        (entry,) = [e for e in self.container["env"] if e["name"] == name]
        if "value" in entry:
            return str(entry["value"])
        path = entry["valueFrom"]["fieldRef"]["fieldPath"]
        prefix = "metadata.annotations['"
        assert path.startswith(prefix) and path.endswith("']"), path
        return self.annotations[path[len(prefix) : -2]]


@dataclass
class Service:
    namespace: str
    name: str
    headless: bool
    selector: dict[str, str]
    ports: list[int]


def _indexed_pods(job: dict[str, Any], namespace: str, name: str) -> list[Pod]:
    """The pods of a Job: an Indexed Job's pod i has hostname `<job>-<i>` and carries its
    index as an annotation and a label (Job docs, "Completion mode")."""
    spec = job.get("spec", job)
    template = spec["template"]
    indexed = spec.get("completionMode") == "Indexed"
    pods = []
    for index in range(spec.get("completions", 1)):
        labels = dict(template.get("metadata", {}).get("labels", {}))
        annotations: dict[str, str] = {}
        if indexed:
            labels[INDEX_ANNOTATION] = str(index)
            annotations[INDEX_ANNOTATION] = str(index)
        pod_spec = template["spec"]
        (container,) = pod_spec["containers"]
        pods.append(
            Pod(
                namespace=namespace,
                hostname=pod_spec.get("hostname") or (f"{name}-{index}" if indexed else name),
                subdomain=pod_spec.get("subdomain"),
                labels=labels,
                annotations=annotations,
                container=container,
            )
        )
    return pods


def _cluster(objects: list[dict[str, Any]]) -> tuple[list[Pod], list[Service]]:
    """What the API server and controllers make of ``objects``."""
    pods: list[Pod] = []
    services: list[Service] = []
    for obj in objects:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        if obj["kind"] == "Service":
            spec = obj["spec"]
            services.append(
                Service(
                    namespace,
                    meta["name"],
                    spec.get("clusterIP") == "None",
                    dict(spec.get("selector", {})),
                    [p["port"] for p in spec.get("ports", [])],
                )
            )
        elif obj["kind"] == "Job":
            pods += _indexed_pods(obj, namespace, meta["name"])
        elif obj["kind"] == "JobSet":
            # JobSet docs: Job `<jobset>-<replicatedJob>-<i>` per replica; every pod gets
            # the jobset-name label and the network subdomain (default: the JobSet's name);
            # with enableDNSHostnames the controller makes a headless Service of that name
            # selecting the jobset-name label.
            network = obj["spec"].get("network", {})
            subdomain = network.get("subdomain") or meta["name"]
            for replicated in obj["spec"]["replicatedJobs"]:
                for number in range(replicated.get("replicas", 1)):
                    job_name = f"{meta['name']}-{replicated['name']}-{number}"
                    template = copy.deepcopy(replicated["template"])
                    template["spec"]["template"].setdefault("metadata", {}).setdefault(
                        "labels", {}
                    )[JOBSET_LABEL] = meta["name"]
                    template["spec"]["template"]["spec"]["subdomain"] = subdomain
                    pods += _indexed_pods(template, namespace, job_name)
            if network.get("enableDNSHostnames"):
                services.append(
                    Service(namespace, subdomain, True, {JOBSET_LABEL: meta["name"]}, [])
                )
    return pods, services


def _resolve(address: str, namespace: str, pods: list[Pod], services: list[Service]) -> Pod:
    """The pod a DNS name reaches from ``namespace``: `<hostname>.<subdomain>` resolves
    when a headless Service named like the subdomain, in the pod's namespace, selects the
    pod (Service docs, "Pod's hostname and subdomain fields")."""
    hostname, _, rest = address.partition(".")
    subdomain, _, where = rest.partition(".")
    where = where.split(".", 1)[0] or namespace
    found = [
        pod
        for pod in pods
        if pod.hostname == hostname and pod.subdomain == subdomain and pod.namespace == where
        for service in services
        if service.name == subdomain
        and service.namespace == where
        and service.headless
        and service.selector
        and all(pod.labels.get(k) == v for k, v in service.selector.items())
    ]
    assert len(found) == 1, f"{address} resolves to {len(found)} pods"
    return found[0]


def _check_rendezvous(objects: list[dict[str, Any]], nodes: int) -> None:
    pods, services = _cluster(objects)
    assert len(pods) == nodes
    ranks = sorted(int(pod.env("RANK")) for pod in pods)
    assert ranks == list(range(nodes))  # one rank each, 0..n-1
    for pod in pods:
        assert pod.env("WORLD_SIZE") == str(nodes)
        master = _resolve(pod.env("MASTER_ADDR"), pod.namespace, pods, services)
        assert master.env("RANK") == "0", (pod.hostname, pod.env("MASTER_ADDR"))
        port = int(pod.env("MASTER_PORT"))
        assert port in [p["containerPort"] for p in master.container["ports"]]
        for service in services:
            if service.ports:  # fdl's own Service names the port it serves
                assert port in service.ports


def _render(nodes: int, name: str = "lab", controller: str | None = None) -> list[dict]:
    target = DeployTarget(
        name,
        "kubernetes",
        registry="ghcr.io/acme",
        namespace="ml",
        nodes=nodes,
        gpus_per_node=1,
        gpus=(H100,),
        controller=controller,
    )
    plan = plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=CU130,
        entrypoint=["/opt/app/bin/train"],
        args=[],
        digest="sha256:" + "ab" * 32,
    )
    return [doc for doc in yaml.safe_load_all(plan.text) if doc]


@pytest.mark.parametrize("controller", [None, "jobset"], ids=["job+service", "jobset"])
@pytest.mark.parametrize("nodes", [2, 3, 8])
@pytest.mark.parametrize("name", ["lab", "a-target-name-long-enough-to-be-cut-" + "x" * 40])
def test_every_pod_finds_rank_0_through_the_service(
    controller: str | None, nodes: int, name: str
) -> None:
    objects = _render(nodes, name, controller)
    assert [o["kind"] for o in objects] == (
        ["JobSet"] if controller else ["Service", "Job"]
    )  # fmt: skip
    _check_rendezvous(objects, nodes)


def test_one_pod_is_its_own_master() -> None:
    (job,) = _render(1)
    pods, services = _cluster([job])
    (pod,) = pods
    assert (pod.env("MASTER_ADDR"), pod.env("RANK"), pod.env("WORLD_SIZE")) == (
        "127.0.0.1",
        "0",
        "1",
    )
    assert services == []


def test_the_check_fails_on_broken_wiring() -> None:
    """Each way the wiring can break, planted in a rendered Service + Job, is caught."""
    good = _render(3)
    _check_rendezvous(good, 3)

    def broken(change) -> list[dict]:  # type: ignore[no-untyped-def]
        objects = copy.deepcopy(good)
        change(*objects)
        return objects

    def selector_the_pods_lack(service: dict, job: dict) -> None:
        service["spec"]["selector"] = {"app": "lab"}

    def master_is_pod_1(service: dict, job: dict) -> None:
        for entry in job["spec"]["template"]["spec"]["containers"][0]["env"]:
            if entry["name"] == "MASTER_ADDR":
                entry["value"] = entry["value"].replace("-0.", "-1.", 1)

    def no_subdomain(service: dict, job: dict) -> None:
        del job["spec"]["template"]["spec"]["subdomain"]

    def rank_fixed(service: dict, job: dict) -> None:
        for entry in job["spec"]["template"]["spec"]["containers"][0]["env"]:
            if entry["name"] == "RANK":
                entry.pop("valueFrom")
                entry["value"] = "0"

    def not_headless(service: dict, job: dict) -> None:
        del service["spec"]["clusterIP"]

    def other_port(service: dict, job: dict) -> None:
        service["spec"]["ports"][0]["port"] = 1234

    for change in (
        selector_the_pods_lack,
        master_is_pod_1,
        no_subdomain,
        rank_fixed,
        not_headless,
        other_port,
    ):
        with pytest.raises(AssertionError):
            _check_rendezvous(broken(change), 3)
