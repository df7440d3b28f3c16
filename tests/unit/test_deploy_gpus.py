"""floDl's global ``fdl --gpus SPEC`` narrows a deploy job: the devices its programs and its
probe see, by position within the GPUs the job gets (SLURM's gres mask, a pod's devices),
said in the plan; the rendered scripts pass bash and shellcheck, and the task's pick is run
here against the masks SLURM sets."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from fdl.deploy import DeployTarget, GpuOffer, ImageArchs, plan_deploy
from fdl.errors import UsageError
from tests.support.images import make_project, make_variant
from tests.support.scripts import assert_bash_accepts

CU130 = ImageArchs("precompiled/cu130", "13.0", ("sm_90", "sm_120", "compute_120"), "2.13.0")
H100 = GpuOffer("9.0", type="h100", product="NVIDIA-H100-80GB-HBM3", driver="580.65")


def _plan(target: DeployTarget):  # type: ignore[no-untyped-def]
    return plan_deploy(
        target,
        project="cpp-train",
        local_image="cpp-train-train:latest",
        archs=CU130,
        entrypoint=["/opt/app/bin/train"],
        args=["--steps", "2"],
    )


def _slurm(runtime: str, visible: tuple[int, ...] | None) -> DeployTarget:
    return DeployTarget(
        "lab", "slurm", runtime=runtime, gpus_per_node=4, gpus=(H100,), visible=visible
    )


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer", "podman", "docker"])
def test_every_runtime_picks_the_gpus_in_each_task_and_the_probe(runtime: str) -> None:
    plan = _plan(_slurm(runtime, (1, 3)))
    text = plan.text
    assert_bash_accepts(text)
    assert "export FDL_GPUS=1,3\n" in text and "export -f fdl_gpus\n" in text
    assert "fdl_gpus || exit 69" in text  # a task without those GPUs stops as the probe would
    assert "bash -c 'fdl_gpus && exec \"$@\"' fdl-probe fdl probe --skip-mount" in text
    if runtime in ("docker", "podman"):
        assert "--env CUDA_VISIBLE_DEVICES --env HIP_VISIBLE_DEVICES" in text
    assert plan.gpus is not None and "by position within those" in plan.gpus
    assert plan.to_json()["gpus"] == {"devices": [1, 3], "note": plan.gpus}
    untouched = _plan(_slurm(runtime, None))
    assert "fdl_gpus" not in untouched.text and untouched.to_json()["gpus"] is None


def _pick(text: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """The script's fdl_gpus, run by bash in a task's environment."""
    start = text.index("export FDL_GPUS=")
    end = text.index("export -f fdl_gpus")
    body = text[start:end] + 'fdl_gpus && echo "$CUDA_VISIBLE_DEVICES $HIP_VISIBLE_DEVICES"\n'
    return subprocess.run(
        ["bash", "-c", body],
        env={"PATH": "/usr/bin:/bin", **environ},
        capture_output=True,
        text=True,
    )


def test_the_task_picks_by_position_within_slurms_mask() -> None:
    text = _plan(_slurm("docker", (1, 3))).text
    # SLURM without device cgroups: the node's numbers of the job's GPUs
    assert _pick(text, CUDA_VISIBLE_DEVICES="4,5,6,7").stdout == "5,7 5,7\n"
    # with ConstrainDevices the step sees 0..3: the positions are the numbers
    assert _pick(text, CUDA_VISIBLE_DEVICES="0,1,2,3").stdout == "1,3 1,3\n"
    # AMD: ROCR_VISIBLE_DEVICES already narrows and renumbers, so HIP takes the positions
    amd = _pick(text, CUDA_VISIBLE_DEVICES="4,5,6,7", ROCR_VISIBLE_DEVICES="4,5,6,7")
    assert amd.stdout == "5,7 1,3\n"
    # no mask from SLURM (no gres on this node): the spec itself
    assert _pick(text).stdout == "1,3 1,3\n"
    # fewer GPUs than the spec names: the task refuses, saying so
    short = _pick(text, CUDA_VISIBLE_DEVICES="4,5", SLURM_PROCID="3")
    assert short.returncode == 1 and "task 3 was given 2 GPU(s) (4,5)" in short.stderr


def test_kubernetes_sets_both_masks_in_the_training_and_probe_containers() -> None:
    target = DeployTarget(
        "pods",
        "kubernetes",
        registry="registry.example/acme",
        gpus_per_node=2,
        gpus=(H100,),
        probe_image="registry.example/acme/fdl:0.5",
        visible=(1,),
    )
    plan = _plan(target)
    (job,) = [o for o in yaml.safe_load_all(plan.text) if o and o["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]
    masks = [
        {"name": "CUDA_VISIBLE_DEVICES", "value": "1"},
        {"name": "HIP_VISIBLE_DEVICES", "value": "1"},
    ]
    assert all(m in spec["containers"][0]["env"] for m in masks)
    assert spec["initContainers"][0]["env"] == masks
    assert "numbered from 0 inside it" in (plan.gpus or "")


@pytest.mark.parametrize(
    ("visible", "gpus_per_node", "why"),
    [
        ((4,), 4, "numbered 0-3 within them"),
        ((0, 9), 4, "numbered 0-3 within them"),
        ((0,), 0, "asks for no GPUs"),
    ],
)
def test_gpus_the_job_does_not_get_are_refused(
    visible: tuple[int, ...], gpus_per_node: int, why: str
) -> None:
    target = replace(_slurm("docker", visible), gpus_per_node=gpus_per_node)
    if gpus_per_node == 0:
        target = replace(target, gpus=())
    with pytest.raises(UsageError, match=why):
        _plan(target)


MANIFEST = """\
images:
  train:
    args: [--steps, "20"]
deploy:
  lab:
    kind: slurm
    registry: 127.0.0.1:5000/acme
    gpus-per-node: 2
    gpus: [{type: h100, capability: "9.0", driver: "580.65"}]
"""


def test_the_global_flag_reaches_render_and_the_dry_run(run_fdl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path, MANIFEST)
    make_variant(project, "precompiled/cu130", cuda="13.0", archs=CU130.codes)
    rendered = run_fdl(["--gpus", "1", "deploy", "render", "lab"], cwd=project)
    assert rendered.exit_code == 0, rendered.output
    assert "export FDL_GPUS=1\n" in rendered.stdout and "by position" in rendered.stderr
    dry = run_fdl(["--gpus", "1", "deploy", "submit", "lab", "--dry-run", "--json"], cwd=project)
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.stdout)
    assert data["dry_run"] is True and data["gpus"]["devices"] == [1]
    assert "export FDL_GPUS=1\n" in data["text"]
    every = json.loads(
        run_fdl(["--gpus", "all", "deploy", "render", "lab", "--json"], cwd=project).stdout
    )
    assert every["gpus"] is None and "fdl_gpus" not in every["text"]
    refused = run_fdl(["--gpus", "0,2", "deploy", "render", "lab"], cwd=project)
    assert refused.exit_code == 2 and "numbered 0-1 within them" in refused.output
