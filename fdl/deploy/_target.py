"""A ``deploy:`` target of the manifest, with defaults applied.

Shapes were checked when the manifest loaded (:mod:`fdl.manifest.sections.deploy`); this
module turns one target into a typed value and checks what the shapes cannot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fdl.errors import ManifestError, UsageError
from fdl.manifest import Manifest

__all__ = ["DEFAULT_MASTER_PORT", "DeployTarget", "GpuOffer", "load_target", "target_names"]

DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class GpuOffer:
    """A GPU model a target offers.

    Attributes:
        capability: Its compute capability (``9.0``).
        type: The SLURM gres type (``h100``), if any.
        product: The Kubernetes ``nvidia.com/gpu.product`` label, if any.
        driver: The oldest NVIDIA driver on its nodes, if declared.
    """

    capability: str
    type: str | None = None
    product: str | None = None
    driver: str | None = None

    @property
    def name(self) -> str:
        return self.type or self.product or f"compute {self.capability}"


@dataclass(frozen=True)
class DeployTarget:
    """One named target, defaults applied (see the section's descriptions)."""

    name: str
    kind: str
    profile: str = "train"
    registry: str | None = None
    args: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    pass_env: tuple[str, ...] = ()
    secret_env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[str, ...] = ()
    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    gpu_type: str | None = None
    gpus: tuple[GpuOffer, ...] = ()
    cpus_per_task: int | None = None
    memory: str | None = None
    time: str | None = None
    master_port: int = DEFAULT_MASTER_PORT
    runtime: str = "docker"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    output: str = "fdl-%x-%j.out"
    sbatch: tuple[str, ...] = ()
    context: str | None = None
    namespace: str = "default"
    service_account: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    tolerations: tuple[tuple[tuple[str, str], ...], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    shm: str = "8Gi"
    controller: str = "job"
    compression: str = "auto"
    origin: str = field(default="", compare=False)

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    def offered(self) -> tuple[GpuOffer, ...]:
        """The GPUs a job of this target can land on (``gpu-type`` narrows them)."""
        if self.gpu_type is None:
            return self.gpus
        return tuple(g for g in self.gpus if self.gpu_type in (g.type, g.product))


def _env(
    manifest: Manifest, key: str, kind: str, raw: dict[str, Any]
) -> tuple[tuple[str, str], ...]:
    """The target's ``env:``, refusing a secret: the values are written into the sbatch
    script (kept under ``.fdl/deploy``) or the Job, and printed by ``deploy render``."""
    from fdl.manifest import is_secret_key, is_secret_node, token_kind

    env: dict[str, str] = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
    for where, name in (("pass-env", n) for n in raw.get("pass-env") or ()):
        if kind != "slurm":
            raise manifest.error(
                f"{key}.{where}",
                "pass-env is for SLURM targets (sbatch exports the submitting environment)",
                hint=f"on Kubernetes read {name} from a Secret: {key}.secret-env: "
                f"{{{name}: SECRET/KEY}}",
            )
    if raw.get("secret-env") and kind != "kubernetes":
        raise manifest.error(
            f"{key}.secret-env",
            "secret-env names a Kubernetes Secret; this is a SLURM target",
            hint=f"list the variables under {key}.pass-env and export them before "
            "`fdl deploy submit`",
        )
    for name, value in env.items():
        secret = is_secret_key(name) or is_secret_node(manifest.node(f"{key}.env.{name}"))
        shape = None if secret else token_kind(value)
        if not secret and shape is None:
            continue
        what = "looks like a secret" if secret else f"the value looks like {shape}"
        fix = (
            f"list {name} under {key}.pass-env and export it before `fdl deploy submit` "
            "(sbatch passes it to the job; it is never written into the script)"
            if kind == "slurm"
            else f"create a Secret (kubectl create secret generic {name.lower().replace('_', '-')} "
            f"--from-literal=value=...) and name it under {key}.secret-env: "
            f"{{{name}: {name.lower().replace('_', '-')}/value}}"
        )
        raise manifest.error(
            f"{key}.env.{name}",
            f"{what}, and env: values are written into the job's script and printed by "
            "`fdl deploy render`",
            hint=f"take it out of fdl.yml (revoke it if it was committed); {fix}",
        )
    return tuple(sorted(env.items()))


def target_names(manifest: Manifest) -> list[str]:
    """The targets declared under ``deploy:``, in order."""
    return [str(name) for name in (manifest.get("deploy") or {})]


def load_target(manifest: Manifest, name: str | None) -> DeployTarget:
    """The target ``name`` (None: the only one declared).

    Raises:
        ManifestError: no ``deploy:`` section, or values that do not fit together.
        UsageError: no such target, or several and none named.
    """
    targets: dict[str, Any] = manifest.get("deploy") or {}
    if not targets:
        raise ManifestError(
            f"{manifest.source} has no `deploy:` section",
            hint="declare a target, e.g.\ndeploy:\n  lab:\n    kind: slurm\n"
            "    registry: 127.0.0.1:5000/you\n    gpus-per-node: 1",
        )
    if name is None:
        if len(targets) != 1:
            raise UsageError(
                f"{len(targets)} deploy targets are declared; name one",
                hint=f"fdl deploy render {sorted(targets)[0]} (targets: {', '.join(targets)})",
            )
        name = next(iter(targets))
    if name not in targets:
        raise UsageError(
            f"no deploy target {name!r} in {manifest.source}",
            hint=f"declared targets: {', '.join(targets)}",
        )
    raw: dict[str, Any] = targets[name]
    key = f"deploy.{name}"
    gpus = tuple(
        GpuOffer(
            capability=str(g["capability"]),
            type=g.get("type"),
            product=g.get("product"),
            driver=str(g["driver"]) if g.get("driver") else None,
        )
        for g in raw.get("gpus") or ()
    )
    gpus_per_node = int(raw.get("gpus-per-node") or 0)
    gpu_type = raw.get("gpu-type")
    if gpu_type is not None and not any(gpu_type in (g.type, g.product) for g in gpus):
        raise manifest.error(
            f"{key}.gpu-type",
            f"{gpu_type!r} is none of the GPUs the target declares",
            hint=f"add it to {key}.gpus (with its capability), or use one of: "
            + (", ".join(g.name for g in gpus) or "(none declared)"),
        )
    kind = str(raw["kind"])
    runtime = str(raw.get("runtime") or "docker")
    origin = manifest.origin(key)
    return DeployTarget(
        name=name,
        kind=kind,
        profile=str(raw.get("profile") or "train"),
        registry=raw.get("registry"),
        args=tuple(str(a) for a in raw["args"]) if raw.get("args") is not None else None,
        env=_env(manifest, key, kind, raw),
        pass_env=tuple(str(n) for n in raw.get("pass-env") or ()),
        secret_env=tuple(
            sorted((str(k), str(v)) for k, v in (raw.get("secret-env") or {}).items())
        ),
        mounts=tuple(str(m) for m in raw.get("mounts") or ()),
        nodes=int(raw.get("nodes") or 1),
        tasks_per_node=int(raw.get("tasks-per-node") or max(gpus_per_node, 1)),
        gpus_per_node=gpus_per_node,
        gpu_type=gpu_type,
        gpus=gpus,
        cpus_per_task=raw.get("cpus-per-task"),
        memory=raw.get("memory"),
        time=raw.get("time"),
        master_port=int(raw.get("master-port") or DEFAULT_MASTER_PORT),
        runtime=runtime,
        partition=raw.get("partition"),
        account=raw.get("account"),
        qos=raw.get("qos"),
        output=str(raw.get("output") or "fdl-%x-%j.out"),
        sbatch=tuple(str(s) for s in raw.get("sbatch") or ()),
        context=raw.get("context"),
        namespace=str(raw.get("namespace") or "default"),
        service_account=raw.get("service-account"),
        image_pull_secrets=tuple(raw.get("image-pull-secrets") or ()),
        tolerations=tuple(
            tuple(sorted((str(k), str(v)) for k, v in t.items() if v is not None))
            for t in raw.get("tolerations") or ()
        ),
        node_selector=tuple(sorted((raw.get("node-selector") or {}).items())),
        shm=str(raw.get("shm") or "8Gi"),
        controller=str(raw.get("controller") or "job"),
        compression=str(raw.get("compression") or "auto"),
        origin=str(origin.location()) if origin else manifest.source,
    )
