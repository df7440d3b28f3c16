"""fdl deploy through the CLI: binding, exit codes, refusal before any push, submit's record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.engine import set_default_engine
from fdl.runner import Completed, set_default_runner
from tests.support.fakes import FakeEngine, FakeRunner
from tests.support.images import make_project, make_variant

MANIFEST = """\
images:
  train:
    args: [--steps, "20"]
deploy:
  lab:
    kind: slurm
    registry: 127.0.0.1:5000/acme
    gpus-per-node: 1
    gpus: [{type: h100, capability: "9.0", driver: "580.65"}]
  pascal:
    kind: kubernetes
    gpus-per-node: 1
    gpus: [{product: NVIDIA-GeForce-GTX-1060-6GB, capability: "6.1"}]
"""
CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, MANIFEST)
    make_variant(project, "precompiled/cu130", cuda="13.0", archs=CU130)
    return project


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    fake = FakeEngine()
    set_default_engine(fake)
    yield fake


def test_render_names_the_image_by_its_tag_never_a_made_up_digest(run_fdl, project: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_fdl(["deploy", "render", "lab"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "#SBATCH --gpus-per-node=1" in result.stdout
    assert "IMAGE=127.0.0.1:5000/acme/cpp-train-train:latest\n" in result.stdout
    assert "sha256:000" not in result.output
    assert "nothing is pushed yet" in result.stderr and "fdl deploy submit lab" in result.stderr
    plan = json.loads(run_fdl(["deploy", "render", "lab", "--json"], cwd=project).stdout)
    assert plan["placement"]["allowed"] == ["h100"]
    assert plan["pinned"] is False and plan["image"].endswith(":latest")


def test_a_dry_run_without_a_registry_says_nothing_is_pushed(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    manifest = (project / "fdl.yml").read_text()
    manifest = manifest.replace("    registry: 127.0.0.1:5000/acme\n", "")
    (project / "fdl.yml").write_text(manifest.replace('capability: "6.1"', 'capability: "9.0"'))
    dry = run_fdl(["deploy", "submit", "lab", "--dry-run"], cwd=project)
    assert dry.exit_code == 0, dry.output
    assert "nothing is pushed" in dry.stderr and "push it as" not in dry.output
    # Kubernetes cannot run this host's images: the dry run refuses as submit would.
    refused = run_fdl(["deploy", "submit", "pascal", "--dry-run"], cwd=project)
    assert refused.exit_code == 2 and "has no `registry:`" in refused.output
    assert engine.pushed == []


def test_a_cpu_image_sent_to_gpus_exits_4_as_the_readme_says(  # type: ignore[no-untyped-def]
    run_fdl, project: Path
) -> None:
    manifest = (project / "fdl.yml").read_text()
    (project / "fdl.yml").write_text(
        manifest.replace("  train:\n", "  train:\n    variant: precompiled/cpu\n", 1)
    )
    make_variant(project, "precompiled/cpu")
    result = run_fdl(["deploy", "render", "lab"], cwd=project)
    assert result.exit_code == 4, result.output
    assert "is a CPU build" in result.output


def test_a_target_the_binaries_cannot_run_on_is_refused_before_any_push(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    result = run_fdl(["deploy", "submit", "pascal"], cwd=project)
    assert result.exit_code == 4, result.output
    assert "cannot run on any of the GPUs of target 'pascal'" in result.output
    assert "fdl libtorch download --cuda 12.6 --torch 2.13.0" in result.output
    assert engine.pushed == []
    assert run_fdl(["deploy", "render"], cwd=project).exit_code == 2  # two targets, none named


def test_submit_pushes_by_digest_submits_and_records(
    run_fdl, project: Path, engine: FakeEngine
) -> None:  # type: ignore[no-untyped-def]
    engine.add_image("cpp-train-train:latest", id="sha256:" + "1" * 64)
    runner = FakeRunner(
        {
            ("sbatch", "--test-only"): Completed([], 0, "", "sbatch: Job 42 to start at..."),
            ("sbatch", "--parsable"): Completed([], 0, "42\n"),
            ("scontrol", "show", "job"): Completed(
                [], 0, "JobId=42 JobState=RUNNING StdOut=/tmp/x.out\n"
            ),
            ("squeue",): Completed([], 0, "RUNNING\n"),
            ("scancel",): Completed([], 0, ""),
        },
        programs={
            "sbatch": "/usr/bin/sbatch",
            "srun": "/usr/bin/srun",
            "docker": "/usr/bin/docker",
        },
    )
    set_default_runner(runner)
    dry = run_fdl(["deploy", "submit", "lab", "--dry-run", "--json"], cwd=project)
    assert dry.exit_code == 0 and engine.pushed == [] and runner.calls == []
    assert json.loads(dry.stdout)["compression"] == "gzip"  # docker on SLURM: auto is gzip
    result = run_fdl(["deploy", "submit", "lab", "--json"], cwd=project)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert engine.pushed == ["127.0.0.1:5000/acme/cpp-train-train:latest"]
    assert data["image"].startswith("127.0.0.1:5000/acme/cpp-train-train@sha256:")
    assert data["image"] != "127.0.0.1:5000/acme/cpp-train-train@sha256:" + "0" * 64
    assert data["job"]["job_id"] == "42"
    script = (project / ".fdl" / "deploy" / "lab.sbatch").read_text()
    assert f"IMAGE={data['image']}" in script
    status = run_fdl(["deploy", "status", "lab", "--json"], cwd=project)
    assert json.loads(status.stdout)["state"] == "RUNNING"
    assert run_fdl(["deploy", "cancel", "lab"], cwd=project).exit_code == 0
    assert ["scancel", "42"] in runner.calls


def test_status_without_a_submission_says_how(run_fdl, project: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_fdl(["deploy", "status", "lab"], cwd=project)
    assert result.exit_code == 2
    assert "fdl deploy submit lab" in result.output


def _submitted(project: Path, engine: FakeEngine, responses: dict) -> FakeRunner:  # type: ignore[type-arg]
    engine.add_image("cpp-train-train:latest", id="sha256:" + "1" * 64)
    runner = FakeRunner(
        {
            ("sbatch", "--test-only"): Completed([], 0),
            ("sbatch", "--parsable"): Completed([], 0, "42\n"),
            ("scontrol", "show", "job"): Completed([], 1),
            ("scancel",): Completed([], 0, ""),
            **responses,
        },
        programs={
            "sbatch": "/usr/bin/sbatch",
            "srun": "/usr/bin/srun",
            "docker": "/usr/bin/docker",
        },
    )
    set_default_runner(runner)
    return runner


def test_ctrl_c_on_submit_wait_cancels_the_job_and_says_so(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    asked: list[str] = []

    def interrupted(argv: list[str]) -> Completed:
        asked.append(argv[0])
        if len(asked) == 1:  # Ctrl-C while following the job
            raise KeyboardInterrupt
        return Completed(argv, 0, "RUNNING|None\n")

    runner = _submitted(project, engine, {("squeue",): interrupted})
    result = run_fdl(["deploy", "submit", "lab", "--wait"], cwd=project)
    assert result.exit_code == 130, result.output
    assert ["scancel", "42"] in runner.calls
    assert "stopped waiting: cancelled slurm job 42 of lab" in result.stderr


def test_cancel_of_an_ended_job_says_so_and_status_says_why_a_job_waits(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    states = iter(["PENDING|Resources\n", "", ""])
    runner = _submitted(
        project,
        engine,
        {
            ("squeue",): lambda argv: Completed(argv, 0, next(states)),
            ("scontrol", "show", "job"): Completed([], 0, "JobId=42 JobState=TIMEOUT\n"),
        },
    )
    assert run_fdl(["deploy", "submit", "lab"], cwd=project).exit_code == 0
    status = run_fdl(["deploy", "status", "lab"], cwd=project)
    assert status.stdout.strip() == "lab: job 42 PENDING (Resources)", status.output
    assert run_fdl(["deploy", "status", "lab", "--job", "42"], cwd=project).exit_code == 0
    cancelled = run_fdl(["deploy", "cancel", "lab"], cwd=project)
    assert cancelled.exit_code == 0
    assert "had already ended (TIMEOUT); nothing to cancel" in cancelled.output
    assert "cancelled slurm" not in cancelled.output
    assert not any(call[0] == "scancel" for call in runner.calls)


def test_submit_builds_the_image_from_the_source_first(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    _submitted(project, engine, {("squeue",): Completed([], 0, "RUNNING|None\n")})
    before = engine.inspect_image("cpp-train-train:latest").id  # an earlier build
    result = run_fdl(["deploy", "submit", "lab", "--json"], cwd=project)
    assert result.exit_code == 0, result.output
    assert [spec.tags for spec in engine.builds][-1] == ("cpp-train-train:latest",)
    assert engine.builds[-1].context == project  # the project as it is now
    assert engine.inspect_image("cpp-train-train:latest").id != before  # what was pushed


def test_placement_reads_the_variant_of_the_built_image_not_the_manifest(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    # The manifest names the cu130 variant; the image that would ship holds a CPU libtorch.
    manifest = project / "fdl.yml"
    manifest.write_text(
        manifest.read_text().replace(
            '    args: [--steps, "20"]\n',
            '    args: [--steps, "20"]\n    labels: {dev.fdl.variant: precompiled/cpu, '
            "dev.fdl.cuda: none, dev.fdl.archs: cpu}\n",
        )
    )
    _submitted(project, engine, {})
    assert run_fdl(["deploy", "render", "lab"], cwd=project).exit_code == 0  # the manifest's
    result = run_fdl(["deploy", "submit", "lab"], cwd=project)
    assert result.exit_code == 4, result.output  # the image cannot run there (README)
    assert "the image's libtorch (precompiled/cpu) is a CPU build" in result.output
    assert engine.pushed == []


def test_kubernetes_client_and_context_are_checked_before_the_build_and_push(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine, tmp_path: Path
) -> None:
    manifest = project / "fdl.yml"
    manifest.write_text(
        manifest.read_text() + "  k8s:\n    kind: kubernetes\n    registry: 127.0.0.1:5000/acme\n"
        "    context: nosuch\n"
    )
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    result = run_fdl(
        ["deploy", "submit", "k8s"], cwd=project, env={"KUBECONFIG": str(tmp_path / "kubeconfig")}
    )
    assert result.exit_code == 4, result.output
    assert "kubeconfig" in result.output or "kubernetes" in result.output
    assert engine.builds == [] and engine.pushed == []


def test_the_profiles_mounts_go_into_the_job_and_a_lost_output_is_named(  # type: ignore[no-untyped-def]
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    manifest = project / "fdl.yml"
    manifest.write_text(
        manifest.read_text().replace(
            '    args: [--steps, "20"]\n',
            '    args: [--steps, "20", --out, /workspace/runs]\n'
            '    mounts: ["./runs:/workspace/runs", "./data:/workspace/data:ro"]\n',
        )
    )
    (project / "data").mkdir()
    _submitted(project, engine, {("squeue",): Completed([], 0, "RUNNING|None\n")})
    result = run_fdl(["deploy", "submit", "lab"], cwd=project)
    assert result.exit_code == 0, result.output
    script = (project / ".fdl" / "deploy" / "lab.sbatch").read_text()
    runs, data = (project / "runs").resolve(), (project / "data").resolve()
    assert f"--volume {data}:/workspace/data:ro --volume {runs}:/workspace/runs" in script
    assert (project / "runs").is_dir()  # made before the job, as `fdl image run` makes it
    assert "no mount" not in result.output
    # Arguments that send the output elsewhere: said before anything is built or submitted.
    manifest.write_text(
        manifest.read_text().replace(
            "  lab:\n    kind: slurm\n", "  lab:\n    kind: slurm\n    args: [--out, /tmp/out]\n"
        )
    )
    dry = run_fdl(["deploy", "submit", "lab", "--dry-run"], cwd=project)
    assert dry.exit_code == 0, dry.output
    assert "the program writes to /tmp/out" in dry.stderr and "no mount" in dry.stderr
