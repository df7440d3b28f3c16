"""The ``deploy:`` section: named targets a training image is submitted to (``fdl deploy``).

Example::

    deploy:
      lab:
        kind: slurm
        registry: 127.0.0.1:5000/acme        # the image is pushed here, run by digest
        runtime: docker                      # pyxis | apptainer | podman | docker
        nodes: 2
        gpus-per-node: 4
        gpu-type: h100                       # --gres=gpu:h100:4 (else --gpus-per-node)
        gpus: [{type: h100, capability: "9.0", driver: "550.54"}]
        partition: gpu
        time: "04:00:00"
        mounts: ["/scratch/data:/workspace/data:ro"]
      k8s:
        kind: kubernetes
        namespace: ml
        gpus: [{product: NVIDIA-H100-80GB-HBM3, capability: "9.0", driver: "550.54"}]

Only shapes are checked here; what fits together (the image's archs against ``gpus``)
is checked by the planner (:mod:`fdl.deploy`). Overlays (``fdl.prod.yml``) merge into
targets like any other section.
"""

from __future__ import annotations

from fdl.manifest.schema import (
    ENV_NAME,
    ENV_RULE,
    MOUNT,
    PROFILE_NAME,
    REGISTRY,
    Bool,
    Enum,
    Int,
    ListOf,
    MapOf,
    Obj,
    Spec,
    Str,
    Version,
    env_name,
    for_generated_files,
    word,
)

__all__ = ["COMPRESSIONS", "CONTROLLERS", "KINDS", "RUNTIMES", "SECTIONS", "TARGET"]

KINDS = ("slurm", "kubernetes")
RUNTIMES = ("pyxis", "apptainer", "podman", "docker")
CONTROLLERS = ("job", "pytorchjob", "jobset")
COMPRESSIONS = ("auto", "gzip", "zstd")
_NAME = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
_NAME_RULE = (
    "a Kubernetes name: lowercase letters, digits and '-', starting and ending with a "
    "letter or digit"
)
# Kubernetes label keys ([prefix/]name) and values: a name of at most 63 characters,
# alphanumeric at both ends, '-', '_' and '.' inside (the prefix is a DNS subdomain).
_LABEL_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = r"(?:[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?/)?" + _LABEL_NAME
_LABEL_RULE = (
    "a Kubernetes label: letters, digits, '-', '_' and '.' (at most 63), alphanumeric at both ends"
)
_LABEL_KEY_RULE = (
    "a Kubernetes label key: an optional DNS prefix and '/', then letters, digits, '-', '_' "
    "and '.' (at most 63), alphanumeric at both ends"
)


def _size(example: str, description: str) -> Str:
    """A quantity with its unit, as SLURM (64G) and Kubernetes (64Gi) write memory."""
    return Str(description, pattern=r"[0-9]+[A-Za-z]*", example=example, rule="a number and a unit")


GPU: Spec = Obj(
    {
        "capability": Version("Compute capability of this GPU model (9.0 for H100)."),
        "type": Str(
            "SLURM gres type (gpu:TYPE:N).",
            pattern=r"[A-Za-z0-9_.-]+",
            example="h100",
            rule="letters, digits, '_', '.' and '-'",
        ),
        "product": Str(
            "Kubernetes node label nvidia.com/gpu.product (GPU feature discovery).",
            pattern=r"[A-Za-z0-9_.-]+",
            example="NVIDIA-H100-80GB-HBM3",
            rule="the label's value: letters, digits, '_', '.' and '-'",
        ),
        "driver": Version("Oldest NVIDIA driver on these nodes (checked against CUDA)."),
    },
    description="A GPU model the target offers.",
    required=("capability",),
)

TOLERATION: Spec = Obj(
    {
        # empty with operator Exists: every taint
        "key": Str(pattern=f"(?:{_LABEL_KEY})?", example="nvidia.com/gpu", rule=_LABEL_KEY_RULE),
        "operator": Enum(("Exists", "Equal")),
        "value": Str(pattern=f"(?:{_LABEL_NAME})?", example="present", rule=_LABEL_RULE),
        "effect": Enum(("NoSchedule", "PreferNoSchedule", "NoExecute")),
    },
    description="A Kubernetes toleration.",
)

TARGET: Spec = Obj(
    {
        "kind": Enum(KINDS, "slurm or kubernetes."),
        "profile": Str(
            "The image profile deployed (default train).",
            pattern=PROFILE_NAME,
            example="train",
        ),
        "registry": Str(
            "Registry (host/namespace) the image is pushed to.",
            pattern=REGISTRY,
            example="ghcr.io/acme",
        ),
        "args": ListOf(Str(), "Arguments of the training program (default: the image's)."),
        "probe": Bool(
            "Run `fdl probe` on the job's nodes before training (default true, for an image "
            "with GPU code): a node whose GPUs or driver cannot run the image stops the job in "
            "seconds with the probe's words. SLURM: the fdl on the job's PATH (exit 69); "
            "Kubernetes: an init container of `probe-image`."
        ),
        "probe-image": Str(
            "Kubernetes: an image with fdl installed, run as the pods' init container for the "
            "probe (the train image holds only the program).",
            pattern=r"[a-z0-9][a-z0-9._/:@-]*",
            example="ghcr.io/acme/fdl:0.9",
            rule="an image reference: lowercase letters, digits and . _ / : @ -",
        ),
        "env": MapOf(
            Str(),
            "Environment of the job (written into the script or Job: no secrets; use pass-env "
            "or secret-env for them).",
            key_pattern=ENV_NAME,
            key_example="NCCL_DEBUG",
            key_rule=ENV_RULE,
        ),
        "pass-env": ListOf(
            env_name("HF_TOKEN"),
            "SLURM: variables the job takes from the environment `fdl deploy submit` runs in "
            "(sbatch exports it; never written into the script). For secrets.",
        ),
        "secret-env": MapOf(
            Str(
                pattern=r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-._a-zA-Z0-9]+",
                example="hf-token/token",
                rule="a Kubernetes Secret's name and one of its keys, as SECRET/KEY",
            ),
            "Kubernetes: variables read from a Secret of the namespace (`kubectl create secret "
            "generic hf-token --from-literal=token=...`), as SECRET/KEY. For secrets.",
            key_pattern=ENV_NAME,
            key_example="HF_TOKEN",
            key_rule=ENV_RULE,
        ),
        "mounts": ListOf(Str(pattern=MOUNT, example="/data:/workspace/data:ro"), "Mounts."),
        "nodes": Int("Nodes (default 1).", minimum=1),
        "tasks-per-node": Int("Processes per node (default: gpus-per-node, else 1).", minimum=1),
        "gpus-per-node": Int("GPUs per node (default 0).", minimum=0),
        "gpu-type": word("h100", "The GPU type asked for (a gpus[].type or .product)."),
        "gpus": ListOf(GPU, "The GPU models the target offers (placement checks them)."),
        "cpus-per-task": Int("CPUs per task.", minimum=1),
        "memory": _size("64G", "Memory per node (SLURM 64G; Kubernetes 64Gi)."),
        "time": Str(
            "Time limit (SLURM [D-]HH:MM:SS).",
            pattern=r"[0-9:-]+",
            example="1-12:00:00",
            rule="[D-]HH:MM:SS",
        ),
        "master-port": Int("Rendezvous port (default 29500).", minimum=1, maximum=65535),
        "compression": Enum(
            COMPRESSIONS,
            "How the pushed layers are compressed: `gzip` (docker push), `zstd` (an OCI "
            "manifest with zstd layers, pushed by fdl), or `auto` (default: zstd where the "
            "runtime pulls it, i.e. Kubernetes; gzip for SLURM runtimes).",
        ),
        # SLURM
        "runtime": Enum(RUNTIMES, "The container runtime of the site (SLURM)."),
        "partition": word("gpu"),
        "account": word("ml-lab"),
        "qos": word("normal"),
        "output": word("logs/%x-%j.out", "Output file pattern (default fdl-%x-%j.out)."),
        "sbatch": ListOf(
            Str(pattern=r"--?\S.*", example="--exclusive", rule="an sbatch option"),
            "Extra #SBATCH lines (options).",
        ),
        # Kubernetes
        "context": word("lab-cluster", "kubeconfig context (default: the current one)."),
        "controller": Enum(
            CONTROLLERS,
            "Kubernetes: `job` (default: a Job; for several nodes an Indexed Job with a headless "
            "Service), `pytorchjob` (Kubeflow's training operator, which sets MASTER_ADDR, "
            "MASTER_PORT, WORLD_SIZE and RANK itself) or `jobset` (a JobSet of the JobSet "
            "controller: one Indexed Job, rendezvous through the JobSet's headless service).",
        ),
        "namespace": Str(pattern=_NAME, example="ml", rule=_NAME_RULE),
        "service-account": Str(pattern=_NAME, example="trainer", rule=_NAME_RULE),
        "image-pull-secrets": ListOf(Str(pattern=_NAME, example="regcred", rule=_NAME_RULE)),
        "tolerations": ListOf(TOLERATION),
        "node-selector": MapOf(
            Str(pattern=f"(?:{_LABEL_NAME})?", example="NVIDIA-H100-80GB-HBM3", rule=_LABEL_RULE),
            "Extra node labels the pods need.",
            key_pattern=_LABEL_KEY,
            key_example="nvidia.com/gpu.family",
            key_rule=_LABEL_KEY_RULE,
        ),
        "shm": _size("16Gi", "Size of the memory-backed /dev/shm (default 8Gi)."),
    },
    description="A place to run the training image.",
    required=("kind",),
)

SECTIONS: dict[str, Spec] = {
    # Values land in the sbatch script and the Kubernetes objects: one line each.
    "deploy": for_generated_files(
        MapOf(
            TARGET,
            "Named deploy targets (`fdl deploy submit TARGET`).",
            key_pattern=_NAME,
            key_example="`lab`",
        )
    )
}
