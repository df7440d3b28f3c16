"""``controller: jobset``: the JobSet fdl renders, checked against the JobSet CRD's own
API as fdl's tests describe it (tests/fixtures/jobset) and its Job template against the
Kubernetes schemas."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fdl.deploy import DeployTarget, GpuOffer, ImageArchs, load_target, plan_deploy
from fdl.manifest import load_manifest

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = Path(__file__).parents[1] / "fixtures" / "jobset" / "jobset-v1alpha2.schema.json"
H100 = GpuOffer("9.0", product="NVIDIA-H100-80GB-HBM3", driver="580.65")
CU130 = ImageArchs("precompiled/cu130", "13.0", ("sm_90", "sm_120", "compute_120"))


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused (as `kubectl apply --validate=strict` does;
    the API server would otherwise drop them silently)."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def _jobset_schema() -> dict[str, Any]:
    return _strict(json.loads(SCHEMA.read_text()))


def _problems(obj: dict[str, Any]) -> list[str]:
    """Schema errors of the JobSet, and of each replicated Job's spec as a batch/v1 Job."""
    validator = jsonschema.Draft202012Validator(_jobset_schema())
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                for e in validator.iter_errors(obj)]  # fmt: skip
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for index, replicated in enumerate(obj["spec"]["replicatedJobs"]):
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
               "spec": replicated["template"]["spec"]}  # fmt: skip
        try:
            kubernetes_validate.validate(job, desired_version="1.31", strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"replicatedJobs[{index}].template.spec: {exc}")
    return problems


def _render(target: DeployTarget) -> dict[str, Any]:
    plan = plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=CU130,
        entrypoint=["/opt/app/bin/train"],
        args=[],
        digest="sha256:" + "ab" * 32,
    )
    (obj,) = [o for o in yaml.safe_load_all(plan.text) if o]
    assert "&id" not in plan.text  # no YAML anchors: each mapping written out
    return dict(obj)


def _target(nodes: int, name: str = "js") -> DeployTarget:
    return DeployTarget(
        name, "kubernetes", registry="ghcr.io/acme", namespace="ml", nodes=nodes,
        gpus_per_node=4, gpus=(H100,), controller="jobset", env=(("NCCL_DEBUG", "INFO"),),
        tolerations=((("key", "nvidia.com/gpu"), ("operator", "Exists")),),
    )  # fmt: skip


def test_a_multi_node_jobset_is_one_indexed_job_that_finds_rank_0_by_hostname() -> None:
    jobset = _render(_target(3))
    assert (jobset["apiVersion"], jobset["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    name = jobset["metadata"]["name"]
    assert jobset["metadata"]["namespace"] == "ml"
    assert jobset["spec"]["network"] == {
        "enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": name,
    }  # fmt: skip
    (replicated,) = jobset["spec"]["replicatedJobs"]
    assert (replicated["name"], replicated["replicas"]) == ("train", 1)
    job = replicated["template"]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 3, 3)
    pod = job["template"]["spec"]
    assert "subdomain" not in pod  # the JobSet controller sets it to the network subdomain
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["MASTER_ADDR"]["value"] == f"{name}-train-0-0.{name}"
    assert env["WORLD_SIZE"]["value"] == "3" and env["NCCL_DEBUG"]["value"] == "INFO"
    assert "job-completion-index" in env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert pod["affinity"]["nodeAffinity"]  # placement by arch, as for the other forms
    assert _problems(jobset) == []


def test_one_node_is_a_one_pod_job_in_the_jobset() -> None:
    jobset = _render(_target(1))
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert "completionMode" not in job
    env = {e["name"]: e for e in job["template"]["spec"]["containers"][0]["env"]}
    assert (env["MASTER_ADDR"]["value"], env["RANK"]["value"]) == ("127.0.0.1", "0")
    assert _problems(jobset) == []


def test_the_longest_job_name_still_gives_pods_a_dns_label_hostname() -> None:
    jobset = _render(_target(2, name="a-target-name-long-enough-to-be-cut-" + "x" * 40))
    env = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    master = {e["name"]: e for e in env["containers"][0]["env"]}["MASTER_ADDR"]["value"]
    hostname = master.split(".")[0]
    assert len(hostname) <= 63 and hostname.endswith("-train-0-0")


def test_the_schema_check_can_fail() -> None:
    jobset = _render(_target(2))
    broken = copy.deepcopy(jobset)
    broken["spec"]["network"]["enableDnsHostnames"] = True  # misspelt
    broken["spec"]["replicatedJobs"][0]["replicas"] = "1"  # not an integer
    assert sorted(_problems(broken)) == [
        "spec.network: Additional properties are not allowed ('enableDnsHostnames' was unexpected)",
        "spec.replicatedJobs.0.replicas: '1' is not of type 'integer'",
    ]
    bad_job = copy.deepcopy(jobset)
    bad_job["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = 3
    assert [p.split(":")[0] for p in _problems(bad_job)] == ["replicatedJobs[0].template.spec"]


def test_the_manifest_accepts_controller_jobset(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text(
        "deploy:\n  js:\n    kind: kubernetes\n    controller: jobset\n    nodes: 2\n"
        "    compression: zstd\n"
    )
    target = load_target(load_manifest(tmp_path / "fdl.yml"), "js")
    assert (target.controller, target.nodes, target.compression) == ("jobset", 2, "zstd")
