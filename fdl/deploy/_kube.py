"""The Kubernetes objects of a target (pure): a Job for one node; for several, an Indexed
Job whose pods find rank 0 through a headless Service; or, when the target's ``controller``
asks, a Kubeflow PyTorchJob or a JobSet.

Pods get ``nvidia.com/gpu`` limits, a memory-backed ``/dev/shm`` (PyTorch's data loaders
and NCCL use shared memory; a container's default is 64 MiB), and node affinity to the
nodes whose GPUs the image's binaries cover (GPU feature discovery labels
``nvidia.com/gpu.compute.major``/``minor`` and ``nvidia.com/gpu.product``). With a
``probe-image`` (an image with fdl: the train image holds only the program), each pod first
runs ``fdl probe`` as an init container on the same GPUs: a node that cannot run the image
fails the pod in seconds, with the probe's words in that container's log.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fdl._grammar import checked
from fdl.deploy._target import DeployTarget, GpuOffer
from fdl.errors import UsageError

# The readiness probe's init container (its log is read before the training container's).
PROBE_CONTAINER = "fdl-probe"

__all__ = [
    "JOBSET_REPLICATED_JOB",
    "PROBE_CONTAINER",
    "affinity",
    "render_kubernetes",
    "to_yaml",
]

_LABEL = "app.kubernetes.io/name"


def affinity(allowed: tuple[GpuOffer, ...]) -> dict[str, Any] | None:
    """Required node affinity: any node with one of ``allowed`` (terms are ORed)."""
    terms = []
    for gpu in allowed:
        major, _, minor = gpu.capability.partition(".")
        expressions = [
            {"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": [major]},
            {"key": "nvidia.com/gpu.compute.minor", "operator": "In", "values": [minor or "0"]},
        ]
        if gpu.product:
            expressions.append(
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": [gpu.product]}
            )
        terms.append({"matchExpressions": expressions})
    if not terms:
        return None
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def _container(
    target: DeployTarget, image: str, args: list[str] | None, master_addr: str | None
) -> dict[str, Any]:
    """The training container; ``master_addr`` is rank 0's DNS name when the pods are
    those of an Indexed Job (each pod's rank is its completion index), None for one pod."""
    env: list[dict[str, Any]] = [
        {"name": "WORLD_SIZE", "value": str(target.nodes)},  # one process per pod
        {"name": "MASTER_PORT", "value": str(target.master_port)},
    ]
    if master_addr:
        env += [
            {"name": "MASTER_ADDR", "value": master_addr},
            {
                "name": "RANK",
                "valueFrom": {
                    "fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                    }
                },
            },
        ]
    else:
        env += [{"name": "MASTER_ADDR", "value": "127.0.0.1"}, {"name": "RANK", "value": "0"}]
    env.append({"name": "LOCAL_RANK", "value": "0"})
    env += [{"name": k, "value": v} for k, v in target.env]
    env += _visible_env(target)
    env += [
        {
            "name": k,
            "valueFrom": {
                "secretKeyRef": dict(zip(("name", "key"), ref.split("/", 1), strict=True))
            },
        }
        for k, ref in target.secret_env
    ]
    container: dict[str, Any] = {
        "name": "train",
        "image": image,
        "env": env,
        "ports": [{"containerPort": target.master_port, "name": "rendezvous"}],
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if args is not None:
        container["args"] = args
    limits: dict[str, str] = {}
    if target.gpus_per_node:
        limits["nvidia.com/gpu"] = str(target.gpus_per_node)
    if target.memory:
        limits["memory"] = target.memory
    if target.cpus_per_task:
        limits["cpu"] = str(target.cpus_per_task * target.tasks_per_node)
    if limits:
        container["resources"] = {"limits": limits}
    for index, mount in enumerate(target.mounts):
        _, path, mode = ([*mount.split(":"), "rw"])[:3]
        container["volumeMounts"].append(
            {"name": f"mount-{index}", "mountPath": path, "readOnly": mode == "ro"}
        )
    return container


def _visible_env(target: DeployTarget) -> list[dict[str, Any]]:
    """floDl's ``--gpus``: both vendors' masks, positions within the pod's GPUs."""
    if target.visible is None:
        return []
    spec = ",".join(str(i) for i in target.visible)
    return [{"name": n, "value": spec} for n in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")]


def _probe_container(target: DeployTarget, probe: tuple[str, ...]) -> dict[str, Any]:
    """The readiness gate: ``fdl probe`` in the target's ``probe-image``, on the GPUs the
    training container gets (the device plugin gives an init container's devices to the
    pod's containers after it)."""
    container: dict[str, Any] = {"name": PROBE_CONTAINER, "image": target.probe_image}
    container["command"] = list(probe)
    if target.visible is not None:
        container["env"] = _visible_env(target)
    if target.gpus_per_node:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(target.gpus_per_node)}}
    return container


def _pod_spec(
    target: DeployTarget,
    image: str,
    args: list[str] | None,
    allowed: tuple[GpuOffer, ...],
    *,
    master_addr: str | None = None,
    subdomain: str | None = None,
    probe: tuple[str, ...] = (),
) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": target.shm}}
    ]
    for index, mount in enumerate(target.mounts):
        host = mount.split(":")[0]
        volumes.append({"name": f"mount-{index}", "hostPath": {"path": host}})
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [_container(target, image, args, master_addr)],
        "volumes": volumes,
    }
    if probe and target.probe_image:
        spec["initContainers"] = [_probe_container(target, probe)]
    if subdomain:
        spec["subdomain"] = subdomain
    if target.service_account:
        spec["serviceAccountName"] = target.service_account
    if target.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in target.image_pull_secrets]
    if target.node_selector:
        spec["nodeSelector"] = dict(target.node_selector)
    if target.tolerations:
        spec["tolerations"] = [dict(t) for t in target.tolerations]
    found = affinity(allowed)
    if found:
        spec["affinity"] = found
    return spec


def _labels(name: str) -> dict[str, str]:
    return {_LABEL: name, "app.kubernetes.io/managed-by": "fdl"}


def _object(api_version: str, kind: str, target: DeployTarget, name: str) -> dict[str, Any]:
    """An object's apiVersion, kind and metadata (name, namespace, fdl's labels)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": target.namespace, "labels": _labels(name)},
    }


def _indexed_job_spec(target: DeployTarget, name: str, pod: dict[str, Any]) -> dict[str, Any]:
    """A Job spec running ``pod``: one pod, or ``nodes`` Indexed pods all at once."""
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "template": {"metadata": {"labels": _labels(name)}, "spec": pod},
    }
    if target.nodes > 1:
        spec.update(completionMode="Indexed", completions=target.nodes, parallelism=target.nodes)
    return spec


# A pod spec of the target's image, arguments and GPUs (_pod_spec with those bound).
PodOf = Callable[..., dict[str, Any]]


def _pytorchjob(target: DeployTarget, name: str, pod_of: PodOf) -> list[dict[str, Any]]:
    """A Kubeflow ``PyTorchJob`` (kubeflow.org/v1): one Master and ``nodes - 1`` Workers.

    The training operator gives every pod MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK
    (one process per pod); it needs the container named ``pytorch`` and takes the port
    named ``pytorchjob-port`` as the rendezvous port.
    """

    def replica(count: int) -> dict[str, Any]:
        spec = pod_of()
        container = spec["containers"][0]
        container["name"] = "pytorch"
        container["ports"] = [{"containerPort": target.master_port, "name": "pytorchjob-port"}]
        own = ("WORLD_SIZE", "MASTER_PORT", "MASTER_ADDR", "RANK")
        container["env"] = [e for e in container["env"] if e["name"] not in own]
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"metadata": {"labels": _labels(name)}, "spec": spec},
        }

    replicas = {"Master": replica(1)}
    if target.nodes > 1:
        replicas["Worker"] = replica(target.nodes - 1)
    job = _object("kubeflow.org/v1", "PyTorchJob", target, name)
    job["spec"] = {
        "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"},
        "pytorchReplicaSpecs": replicas,
    }
    return [job]


# The JobSet's one replicated Job. Pod hostnames are <jobset>-<this>-<job index>-<pod index>
# and must fit a DNS label (63): fdl's job names are at most 52 characters.
JOBSET_REPLICATED_JOB = "train"


def _jobset(target: DeployTarget, name: str, pod_of: PodOf) -> list[dict[str, Any]]:
    """A ``JobSet`` (jobset.x-k8s.io/v1alpha2) with one replicated Job: an Indexed Job
    of ``nodes`` pods (for one node, a plain one-pod Job).

    The JobSet controller creates the headless Service (named after the subdomain, the
    JobSet's name by default) and gives each pod the hostname
    ``<jobset>-<replicated job>-<job index>-<pod index>``, so rank 0 is
    ``<name>-train-0-0.<name>``; each pod's rank is its completion index.
    """
    several = target.nodes > 1
    master = f"{name}-{JOBSET_REPLICATED_JOB}-0-0.{name}" if several else None
    pod = pod_of(master_addr=master)
    jobset = _object("jobset.x-k8s.io/v1alpha2", "JobSet", target, name)
    jobset["spec"] = {
        "failurePolicy": {"maxRestarts": 0},
        "network": {
            "enableDNSHostnames": True,
            "publishNotReadyAddresses": True,
            "subdomain": name,
        },
        "replicatedJobs": [
            {
                "name": JOBSET_REPLICATED_JOB,
                "replicas": 1,
                "template": {
                    "metadata": {"labels": _labels(name)},
                    "spec": _indexed_job_spec(target, name, pod),
                },
            }
        ],
    }
    return [jobset]


def render_kubernetes(
    target: DeployTarget,
    *,
    image: str,
    name: str,
    args: list[str] | None,
    allowed: tuple[GpuOffer, ...] = (),
    probe: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """The objects to apply: ``[Job]`` for one node, ``[Service, Job]`` for several, or
    a ``PyTorchJob`` / ``JobSet`` when the target's ``controller`` says so.

    Args:
        target: The Kubernetes target.
        image: The image by digest.
        name: The Job's name (a DNS label).
        args: The program's arguments (None: the image's default).
        allowed: GPUs the binaries cover (node affinity); empty for none.
        probe: ``fdl probe ...``, each pod's init container when the target has a
            ``probe-image`` (empty: none).
    """
    pod_of = partial(_pod_spec, target, image, args, allowed, probe=probe)
    if target.controller == "pytorchjob":
        return _pytorchjob(target, name, pod_of)
    if target.controller == "jobset":
        return _jobset(target, name, pod_of)
    several = target.nodes > 1
    # Indexed Job pods are named <job>-<index>; the headless Service gives them DNS names.
    pod = pod_of(
        master_addr=f"{name}-0.{name}" if several else None,
        subdomain=name if several else None,
    )
    job = _object("batch/v1", "Job", target, name)
    job["spec"] = _indexed_job_spec(target, name, pod)
    if not several:
        return [job]
    service = _object("v1", "Service", target, name)
    service["spec"] = {
        "clusterIP": "None",
        "selector": {_LABEL: name},
        "publishNotReadyAddresses": True,
        "ports": [{"name": "rendezvous", "port": target.master_port}],
    }
    return [service, job]


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream, keys sorted (deterministic); every text in it held
    against the YAML grammar of :mod:`fdl._grammar` first (the safe dumper quotes it)."""
    import yaml

    _check_texts(objects)
    return "".join(
        "---\n" + yaml.safe_dump(obj, sort_keys=True, default_flow_style=False) for obj in objects
    )


def _check_texts(value: object) -> None:
    if isinstance(value, str):
        checked(
            "yaml",
            value,
            what="a value",
            source="the Kubernetes manifest",
            hint=_HINT,
            error=UsageError,
        )
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_texts(key)
            _check_texts(item)
    elif isinstance(value, list):
        for item in value:
            _check_texts(item)


_HINT = "change the value in fdl.yml's deploy section, or the command's arguments"
