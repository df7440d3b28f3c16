"""A target of the manifest's ``deploy:`` section as a typed value.

Shapes were checked when the manifest loaded (:mod:`fdl.manifest.sections.deploy`); this
module turns one target into a :class:`~fdl.deploy.DeployTarget` and checks what the
shapes cannot (with its backend: the fields of another kind, secrets in ``env:``).
"""

from __future__ import annotations

from typing import Any

from fdl.deploy._backend import backend
from fdl.deploy._target import DEFAULT_MASTER_PORT, DeployTarget, GpuOffer
from fdl.errors import ManifestError, UsageError
from fdl.manifest import Manifest

__all__ = ["load_target", "target_names"]


def _env(
    manifest: Manifest, key: str, kind: str, raw: dict[str, Any]
) -> tuple[tuple[str, str], ...]:
    """The target's ``env:``, refusing a secret: the values are written into the sbatch
    script (kept under ``.fdl/deploy``) or the Job, and printed by ``deploy render``."""
    from fdl.manifest import is_secret_key, is_secret_node, token_kind

    via = backend(kind)
    env: dict[str, str] = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
    via.check_fields(manifest, key, raw)  # the fields of another kind of target
    for name, value in env.items():
        secret = is_secret_key(name) or is_secret_node(manifest.node(f"{key}.env.{name}"))
        shape = None if secret else token_kind(value)
        if not secret and shape is None:
            continue
        what = "looks like a secret" if secret else f"the value looks like {shape}"
        fix = via.secret_fix(key, name)
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
        probe=raw.get("probe") is not False,
        probe_image=raw.get("probe-image"),
        origin=str(origin.location()) if origin else manifest.source,
    )
