"""A ``deploy:`` target of the manifest, with defaults applied (read by :mod:`._load`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_MASTER_PORT", "DeployTarget", "GpuOffer"]

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
    probe: bool = True
    probe_image: str | None = None
    # floDl's global `fdl --gpus SPEC deploy ...`: the devices each task's program (and the
    # probe) sees, by position within the GPUs the job gets on its node; None: all of them
    visible: tuple[int, ...] | None = None
    origin: str = field(default="", compare=False)

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    def offered(self) -> tuple[GpuOffer, ...]:
        """The GPUs a job of this target can land on (``gpu-type`` narrows them)."""
        if self.gpu_type is None:
            return self.gpus
        return tuple(g for g in self.gpus if self.gpu_type in (g.type, g.product))
