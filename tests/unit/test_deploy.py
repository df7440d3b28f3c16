"""fdl.deploy: the deploy: section, placement by arch, the sbatch and Kubernetes renderers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fdl.deploy import (
    DeployTarget,
    GpuOffer,
    ImageArchs,
    check_placement,
    load_target,
    plan_deploy,
    pyxis_image,
    remote_name,
)
from fdl.errors import EnvironmentProblem, ManifestError, UsageError
from fdl.manifest import load_manifest
from tests.support.scripts import assert_bash_accepts

DIGEST = "sha256:" + "ab" * 32
PASCAL_BLACKWELL = ImageArchs("builds/sm61-sm120", "12.8", ("sm_61", "sm_120", "compute_120"))
CU130 = ImageArchs(
    "precompiled/cu130",
    "13.0",
    ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
    "2.13.0",
)
H100 = GpuOffer("9.0", type="h100", product="NVIDIA-H100-80GB-HBM3", driver="580.65")
GTX1060 = GpuOffer("6.1", type="gtx1060", product="NVIDIA-GeForce-GTX-1060-6GB", driver="580.65")

MANIFEST = """\
deploy:
  lab:
    kind: slurm
    registry: 127.0.0.1:5000/acme
    nodes: 2
    gpus-per-node: 4
    gpu-type: h100
    gpus: [{type: h100, capability: "9.0", driver: "580.65"}, {type: p40, capability: "6.1"}]
    partition: gpu
    account: ml
    qos: high
    time: "04:00:00"
    memory: 64G
    cpus-per-task: 8
    sbatch: ["--exclusive"]
    env: {NCCL_DEBUG: INFO}
    mounts: ["/scratch/data:/workspace/data:ro"]
  k8s:
    kind: kubernetes
    registry: ghcr.io/acme
    namespace: ml
    nodes: 3
    gpus-per-node: 1
    gpus: [{product: NVIDIA-H100-80GB-HBM3, capability: "9.0"}, {product: Tesla-P40, capability: "6.1"}]
    image-pull-secrets: [regcred]
    service-account: trainer
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
"""


def _project(tmp_path: Path, text: str = MANIFEST) -> Path:
    (tmp_path / "fdl.yml").write_text(text)
    return tmp_path


def _plan(target: DeployTarget, archs: ImageArchs = PASCAL_BLACKWELL, **kw: object):  # type: ignore[no-untyped-def]
    return plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=archs,
        entrypoint=["/opt/app/bin/train"],
        args=["--steps", "2"],
        digest=DIGEST,
        **kw,  # type: ignore[arg-type]
    )


def test_targets_load_with_defaults_and_origins(tmp_path: Path) -> None:
    manifest = load_manifest(_project(tmp_path))
    lab = load_target(manifest, "lab")
    assert (lab.kind, lab.nodes, lab.tasks_per_node, lab.world_size) == ("slurm", 2, 4, 8)
    assert lab.offered() == (GpuOffer("9.0", type="h100", driver="580.65"),)
    assert lab.origin.startswith("fdl.yml:3")
    with pytest.raises(UsageError, match="name one"):
        load_target(manifest, None)
    with pytest.raises(UsageError, match="no deploy target 'nope'") as caught:
        load_target(manifest, "nope")
    assert caught.value.hint == "declared targets: lab, k8s"


def test_an_overlay_points_a_target_at_another_cluster(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "fdl.prod.yml").write_text("deploy:\n  lab:\n    partition: prod\n    nodes: 4\n")
    lab = load_target(load_manifest(project, env="prod"), "lab")
    assert (lab.partition, lab.nodes, lab.account) == ("prod", 4, "ml")


def test_bad_shapes_are_manifest_errors_with_locations(tmp_path: Path) -> None:
    project = _project(tmp_path, "deploy:\n  lab:\n    kind: lsf\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(project)
    first = getattr(caught.value, "errors", [caught.value])[0]
    assert str(first.location).startswith("fdl.yml:3")
    project = _project(
        tmp_path,
        'deploy:\n  lab:\n    kind: slurm\n    gpu-type: a100\n    gpus: [{type: h100, capability: "9.0"}]\n',
    )
    with pytest.raises(ManifestError, match="gpu-type: 'a100' is none of the GPUs"):
        load_target(load_manifest(project), "lab")


# --- placement ------------------------------------------------------------------


def _target(kind: str, *gpus: GpuOffer, gpu_type: str | None = None) -> DeployTarget:
    return DeployTarget(
        "t", kind, gpus_per_node=1, gpus=gpus, gpu_type=gpu_type, origin="fdl.yml:2"
    )


@pytest.mark.parametrize("kind", ["slurm", "kubernetes"])
def test_a_pascal_blackwell_build_is_refused_on_h100(kind: str) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        check_placement(_target(kind, H100), PASCAL_BLACKWELL)
    error = caught.value
    assert "cannot run on any of the GPUs" in error.message
    assert "no code for sm_90" in (error.details or "")
    # No torch release known for the build: a source build of the target's archs only.
    assert "fdl libtorch build --archs 9.0`" in (error.hint or "")


@pytest.mark.parametrize("kind", ["slurm", "kubernetes"])
def test_cu130_is_refused_on_a_gtx_1060_with_the_build_advice(kind: str) -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        check_placement(_target(kind, GTX1060), CU130)
    assert "no code for sm_61" in (caught.value.details or "")
    # torch 2.13's official cu126 build has sm_61: a download, not a source build.
    assert "`fdl libtorch download --cuda 12.6 --torch 2.13.0`" in (caught.value.hint or "")
    assert "fdl libtorch build" not in (caught.value.hint or "")


@pytest.mark.parametrize("kind", ["slurm", "kubernetes"])
def test_a_p100_target_is_told_the_official_build_that_has_sm_60_not_an_8_arch_build(
    kind: str,
) -> None:
    p100 = GpuOffer("6.0", type="p100", driver="550.54")
    with pytest.raises(EnvironmentProblem) as caught:
        check_placement(_target(kind, p100), CU130)
    hint = caught.value.hint or ""
    assert "official cu126 build" in hint and "--cuda 12.6 --torch 2.13.0" in hint
    assert "--archs" not in hint  # never the image's 7 archs plus sm_60
    # A release with no official build for sm_60: the target's arch only.
    newer = ImageArchs("precompiled/cu130", "13.0", CU130.codes, "2.15.0")
    with pytest.raises(EnvironmentProblem) as caught:
        check_placement(_target(kind, p100), newer)
    assert "`fdl libtorch build --archs 6.0`" in (caught.value.hint or "")


def test_an_old_driver_is_refused_with_the_driver_floor() -> None:
    old = GpuOffer("9.0", type="h100", driver="535.104")
    with pytest.raises(EnvironmentProblem) as caught:
        check_placement(_target("slurm", old), CU130)
    assert "CUDA 13.0 needs driver >= 580" in (caught.value.details or "")
    hint = caught.value.hint or ""
    assert "fdl libtorch download --cuda 12." in hint and "--torch 2.13.0" in hint
    assert "update the nodes' driver" in hint


def test_a_blackwell_node_on_an_older_driver_than_r570_is_told_to_upgrade_the_driver() -> None:
    """No CUDA runs on sm_120 before R570: the fix is the driver, never an older CUDA
    (cu126 has no sm_120 code at all)."""
    node = GpuOffer("12.0", type="rtx5060ti", driver="560.35.03")
    with pytest.raises(EnvironmentProblem) as caught:
        check_placement(_target("slurm", node), CU130)
    hint = caught.value.hint or ""
    # R570 for the GPU, 580 for the image's CUDA 13.0: the one upgrade that does both
    assert "update the nodes' NVIDIA driver to 580 or newer" in hint
    assert "sm_120 (Blackwell) needs driver >= 570" in hint
    assert "--cuda" not in hint and "older CUDA" not in hint


def test_slurm_needs_every_gpu_covered_kubernetes_pins_to_the_covered() -> None:
    with pytest.raises(EnvironmentProblem, match="all of the GPUs"):
        check_placement(_target("slurm", H100, GTX1060), CU130)
    # pinning the gres type to the covered GPU makes it fit
    assert check_placement(_target("slurm", H100, GTX1060, gpu_type="h100"), CU130).allowed == (
        H100,
    )
    placement = check_placement(_target("kubernetes", H100, GTX1060), CU130)
    assert placement.allowed == (H100,)


def test_ptx_covers_newer_gpus_and_cpu_images_refuse_gpu_targets() -> None:
    blackwell = GpuOffer("12.1", type="gb10")
    verdict = check_placement(_target("slurm", blackwell), PASCAL_BLACKWELL).verdicts[0]
    assert verdict.ok and "sm_120" in verdict.reason  # compatible cubin (same major)
    with pytest.raises(EnvironmentProblem, match="CPU build") as cpu:
        check_placement(_target("slurm", H100), ImageArchs("precompiled/cpu", None, ()))
    assert cpu.value.exit_code == 4  # the README's code for an image that cannot run there
    with pytest.raises(UsageError, match="declares none"):
        check_placement(_target("slurm"), CU130)
    cpu_target = DeployTarget("t", "slurm")
    assert check_placement(cpu_target, ImageArchs("precompiled/cpu", None, ())).verdicts == ()


# --- SLURM ----------------------------------------------------------------------


def test_sbatch_script_has_resources_rendezvous_and_the_digest(tmp_path: Path) -> None:
    lab = load_target(load_manifest(_project(tmp_path)), "lab")
    plan = _plan(lab, CU130)
    text = plan.text
    assert plan.image == f"127.0.0.1:5000/acme/cpp-train-train@{DIGEST}"
    for line in (
        "#SBATCH --job-name=fdl-cpp-train-lab",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --gres=gpu:h100:4",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=64G",
        "#SBATCH --time=04:00:00",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=ml",
        "#SBATCH --qos=high",
        "#SBATCH --exclusive",
        f"IMAGE={plan.image}",
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        "export MASTER_PORT=29500",
        'export WORLD_SIZE="$SLURM_NTASKS"',
        'export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID"',
        "export NCCL_DEBUG=INFO",
    ):
        assert line in text, line
    assert 'docker run --name "$name" "$@" &' in text
    assert "--rm --init --network=host --ipc=host --gpus all" in text
    # The container dies with the job step: stopped by name within KillWait.
    assert 'name="fdl-$SLURM_JOB_ID-${SLURM_STEP_ID:-0}-$SLURM_PROCID"' in text
    assert 'docker stop --time "$FDL_STOP_TIME" "$name"' in text
    assert 'trap "stop; exit 143" TERM' in text
    assert 'docker rm --force "$name"' in text  # a requeued run's stale container
    assert "--volume /scratch/data:/workspace/data:ro" in text
    assert '"$IMAGE" --steps 2' in text


def _slurm(runtime: str) -> DeployTarget:
    return DeployTarget(
        "lab",
        "slurm",
        runtime=runtime,
        gpus_per_node=2,
        gpus=(H100,),
        mounts=("/data:/workspace/data:ro",),
        env=(("NCCL_DEBUG", "INFO"),),
    )


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer", "podman", "docker"])
def test_every_runtime_renders_a_script_bash_accepts(runtime: str) -> None:
    text = _plan(_slurm(runtime), CU130).text
    assert_bash_accepts(text)
    if runtime == "pyxis":
        assert '--container-image="$IMAGE"' in text
        assert "IMAGE=127.0.0.1:5000#" not in text  # no registry: local name kept
        assert "--container-mounts=/data:/workspace/data:ro" in text
        assert "fdl-task /opt/app/bin/train --steps 2" in text
        assert "--gpus-per-node=2" in text
    elif runtime == "apptainer":
        assert 'apptainer run --nv --bind /data:/workspace/data:ro "docker://$IMAGE"' in text
    elif runtime == "podman":
        assert "--device nvidia.com/gpu=all" in text
        assert "--env RANK --env LOCAL_RANK --env NCCL_DEBUG" in text


def test_pyxis_names_the_registry_with_a_hash() -> None:
    assert pyxis_image(f"127.0.0.1:5000/acme/x@{DIGEST}") == f"127.0.0.1:5000#acme/x@{DIGEST}"
    assert pyxis_image("nvcr.io/nvidia/pytorch:25.01") == "nvcr.io#nvidia/pytorch:25.01"
    assert pyxis_image("acme/x:1") == "acme/x:1"


def test_remote_name_moves_the_image_under_the_registry() -> None:
    target = DeployTarget("t", "slurm", registry="ghcr.io/acme")
    assert remote_name(target, "cpp-train-train:latest") == "ghcr.io/acme/cpp-train-train:latest"
    assert remote_name(target, "localhost:5000/x/y") == "ghcr.io/acme/y:latest"
    assert remote_name(DeployTarget("t", "slurm"), "a/b:1") == "a/b:1"


# --- Kubernetes -----------------------------------------------------------------


def _objects(text: str) -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_several_nodes_make_an_indexed_job_with_a_headless_service(tmp_path: Path) -> None:
    k8s = load_target(load_manifest(_project(tmp_path)), "k8s")
    plan = _plan(k8s, CU130)
    service, job = _objects(plan.text)
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"  # type: ignore[index]
    spec = job["spec"]  # type: ignore[index]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]  # type: ignore[index]
    container = pod["containers"][0]
    assert container["image"] == plan.image and "@sha256:" in plan.image
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    env = {e["name"]: e for e in container["env"]}
    assert env["MASTER_ADDR"]["value"] == f"{plan.job_name}-0.{plan.job_name}"
    assert "job-completion-index" in env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert env["WORLD_SIZE"]["value"] == "3"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["serviceAccountName"] == "trainer"
    assert pod["tolerations"] == [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
    ]
    # only the H100 nodes: CUDA 13 has no Pascal code
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": ["9"]},
                {"key": "nvidia.com/gpu.compute.minor", "operator": "In", "values": ["0"]},
                {
                    "key": "nvidia.com/gpu.product",
                    "operator": "In",
                    "values": ["NVIDIA-H100-80GB-HBM3"],
                },
            ]
        }
    ]
    assert job["metadata"]["namespace"] == "ml"  # type: ignore[index]


def test_one_node_is_a_plain_job() -> None:
    target = DeployTarget("one", "kubernetes", gpus_per_node=1, gpus=(H100,), args=("--steps", "5"))
    (job,) = _objects(_plan(target, CU130).text)
    assert job["kind"] == "Job" and "completionMode" not in job["spec"]  # type: ignore[operator]
    container = job["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    assert container["args"] == ["--steps", "5"]


def test_generated_objects_pass_the_kubernetes_schemas(tmp_path: Path) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    k8s = load_target(load_manifest(_project(tmp_path)), "k8s")
    single = DeployTarget("one", "kubernetes", gpus_per_node=1, gpus=(H100,), memory="32Gi")
    for target in (k8s, single):
        for obj in _objects(_plan(target, CU130).text):
            kubernetes_validate.validate(obj, desired_version="1.31", strict=True)
    bad = _objects(_plan(single, CU130).text)[0]
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3  # type: ignore[index]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, desired_version="1.31", strict=True)


def test_the_manuals_example_is_a_valid_manifest(tmp_path: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "commands" / "deploy.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    manifest = load_manifest(_project(tmp_path, example))
    lab, k8s = load_target(manifest, "lab"), load_target(manifest, "k8s")
    assert (lab.runtime, lab.gpu_type, k8s.nodes, k8s.shm) == ("pyxis", "h100", 4, "16Gi")
    text = _plan(lab, CU130).text
    assert (
        "--gres=gpu:h100:4" in text
        and "IMAGE='registry.lab.example:5000#acme/cpp-train-train@sha256:" in text
    )


def _openapi_problems(data: object, type_name: str, path: str = "") -> list[str]:
    """``data`` against the OpenAPI models of the kubernetes and kubeflow-training clients:
    unknown keys and wrong types, recursively."""
    import re as _re

    from kubeflow.training import models as kubeflow_models
    from kubernetes.client import models as core_models

    scalars = {"str": str, "int": int, "bool": bool, "float": (int, float)}
    if type_name in scalars:
        ok = isinstance(data, scalars[type_name]) and not (
            type_name == "int" and isinstance(data, bool)
        )
        return [] if ok else [f"{path}: {data!r} is not {type_name}"]
    if type_name == "object":
        return []
    if match := _re.fullmatch(r"(?:list|List)\[(.+)\]", type_name):
        if not isinstance(data, list):
            return [f"{path}: not a list"]
        return [
            p for i, v in enumerate(data) for p in _openapi_problems(v, match[1], f"{path}[{i}]")
        ]
    if match := _re.fullmatch(r"dict\(str, (.+)\)|Dict\[str, (.+)\]", type_name):
        if not isinstance(data, dict):
            return [f"{path}: not a mapping"]
        inner = match[1] or match[2]
        return [p for k, v in data.items() for p in _openapi_problems(v, inner, f"{path}.{k}")]
    model = getattr(kubeflow_models, type_name, None) or getattr(core_models, type_name)
    if not isinstance(data, dict):
        return [f"{path}: not a {type_name} mapping"]
    keys = {json_key: attr for attr, json_key in model.attribute_map.items()}
    problems = [f"{path}.{k}: not a field of {type_name}" for k in data if k not in keys]
    for key, value in data.items():
        if key in keys:
            problems += _openapi_problems(value, model.openapi_types[keys[key]], f"{path}.{key}")
    return problems


def test_a_pytorchjob_for_kubeflows_training_operator(tmp_path: Path) -> None:
    pytest.importorskip("kubeflow.training")
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    target = DeployTarget(
        "kf", "kubernetes", nodes=3, gpus_per_node=2, gpus=(H100,), controller="pytorchjob",
        env=(("NCCL_DEBUG", "INFO"),), image_pull_secrets=("regcred",),
    )  # fmt: skip
    (job,) = _objects(_plan(target, CU130).text)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert _openapi_problems(job, "KubeflowOrgV1PyTorchJob") == []
    replicas = job["spec"]["pytorchReplicaSpecs"]  # type: ignore[index]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"  # the operator's required container name
    assert container["ports"] == [{"containerPort": 29500, "name": "pytorchjob-port"}]
    names = {e["name"] for e in container["env"]}
    assert "NCCL_DEBUG" in names and "LOCAL_RANK" in names
    assert not names & {"MASTER_ADDR", "RANK", "WORLD_SIZE", "MASTER_PORT"}  # the operator's
    for replica in replicas.values():  # the pods themselves pass the core schemas
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                    "template": replica["template"]}  # fmt: skip
        kubernetes_validate.validate(template, desired_version="1.31", strict=True)
    # the check can fail: a misspelt field is found
    replicas["Master"]["restartPolcy"] = "Never"
    assert _openapi_problems(job, "KubeflowOrgV1PyTorchJob") == [
        ".spec.pytorchReplicaSpecs.Master.restartPolcy: not a field of KubeflowOrgV1ReplicaSpec"
    ]
