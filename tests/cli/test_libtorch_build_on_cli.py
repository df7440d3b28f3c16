"""``fdl libtorch build --on TARGET`` through the CLI, SLURM stood in for: the dry run, the
refusals, Ctrl-C while following, a failed job, and the pull of what the job pushed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fdl.deploy
from fdl.deploy import JobRecord, JobStatus
from fdl.errors import Interrupted

REPO = "127.0.0.1:5000/team/libtorch"
DIGEST = "sha256:" + "b" * 64


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "fdl.yml").write_text(
        f"libtorch:\n  registry: {REPO}\n"
        "deploy:\n  lab:\n    kind: slurm\n    cpus-per-task: 4\n"
        "    gpus:\n      - {capability: '8.0', type: a100}\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}


def test_dry_run_json_is_the_job_and_its_script(run_fdl, project: Path, env) -> None:
    result = run_fdl(
        ["libtorch", "build", "--on", "lab", "--dry-run", "--json"], cwd=project, env=env
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["action"] == "submit" and plan["target"] == "lab"
    assert plan["command"][-8:] == [
        "build",
        "--docker",
        "--archs",
        "8.0",
        "--jobs",
        "4",
        "--push",
        "--json",
    ]
    assert "#SBATCH --cpus-per-task=4" in plan["script"]
    assert not (project / ".fdl").exists()  # nothing written, nothing submitted


def test_build_on_needs_the_team_registry(run_fdl, project: Path, env) -> None:
    text = (project / "fdl.yml").read_text().replace(f"libtorch:\n  registry: {REPO}\n", "")
    (project / "fdl.yml").write_text(text)
    result = run_fdl(["libtorch", "build", "--on", "lab", "--dry-run"], cwd=project, env=env)
    assert result.exit_code == 2, result.output
    assert "none is set" in result.stderr and "libtorch.registry:" in result.stderr


def test_no_pull_needs_on(run_fdl, project: Path, env) -> None:
    result = run_fdl(["libtorch", "build", "--no-pull", "--dry-run"], cwd=project, env=env)
    assert result.exit_code == 2 and "--on TARGET --no-pull" in result.stderr


def test_an_unknown_target_is_refused(run_fdl, project: Path, env) -> None:
    result = run_fdl(["libtorch", "build", "--on", "nope", "--dry-run"], cwd=project, env=env)
    assert result.exit_code == 2 and "no deploy target 'nope'" in result.stderr


class FakeSlurm:
    """submit_script, follow_output and job_status as SLURM would answer them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, state: str, answer: dict | None) -> None:
        self.state = state
        self.answer = answer
        self.interrupt = False
        monkeypatch.setattr(fdl.deploy, "submit_script", self.submit)
        monkeypatch.setattr(fdl.deploy, "follow_output", self.follow)
        monkeypatch.setattr(fdl.deploy, "job_status", lambda record, runner: JobStatus(self.state))

    def submit(self, target, job, state_dir, runner):  # type: ignore[no-untyped-def]
        self.script = job.text
        if self.answer is not None:
            answers = state_dir / "libtorch-build"
            answers.mkdir(parents=True, exist_ok=True)
            (answers / "42.json").write_text(json.dumps(self.answer))
        return JobRecord(
            target.name, "slurm", "42", job.image, str(state_dir / job.filename), "/o/42"
        )

    def follow(self, record, runner, *, follow):  # type: ignore[no-untyped-def]
        yield "fdl: libtorch build job 42 on node1"
        if self.interrupt:
            raise Interrupted()


def test_ctrl_c_while_following_says_the_job_goes_on_and_how_to_end_it(
    run_fdl, project: Path, env, monkeypatch
) -> None:
    slurm = FakeSlurm(monkeypatch, "RUNNING", None)
    slurm.interrupt = True
    result = run_fdl(["libtorch", "build", "--on", "lab"], cwd=project, env=env)
    assert result.exit_code == 130, result.output
    assert "fdl: libtorch build job 42 on node1" in result.stderr
    assert "SLURM job 42 goes on on lab" in result.stderr
    assert "fdl deploy cancel lab --job 42" in result.stderr
    assert "fdl deploy logs lab -f --job 42" in result.stderr


def test_a_failed_job_is_a_failure_with_its_output(run_fdl, project: Path, env, monkeypatch):
    FakeSlurm(monkeypatch, "TIMEOUT", None)
    result = run_fdl(["libtorch", "build", "--on", "lab"], cwd=project, env=env)
    assert result.exit_code == 1, result.output
    assert "the build job 42 on lab ended TIMEOUT; it pushed nothing" in result.stderr
    assert "/o/42" in result.stderr and "fdl deploy logs lab --job 42" in result.stderr


def test_what_the_job_pushed_is_pulled_by_digest(run_fdl, project: Path, env, monkeypatch):
    import fdl.cli.commands.libtorch_build_on as command

    answer = {
        "variant": "builds/x",
        "path": "/nowhere/libtorch/builds/x",  # not visible here: pulled
        "pushed": {"reference": f"{REPO}@{DIGEST}", "digest": DIGEST},
    }
    FakeSlurm(monkeypatch, "COMPLETED", answer)
    pulled: list[tuple[str, bool]] = []

    class Pulled:
        def to_json(self) -> dict:
            return {"reference": pulled[0][0]}

    def fake_pull(session, reference, *, activate=True, **_):  # type: ignore[no-untyped-def]
        pulled.append((reference, activate))
        return Pulled()

    monkeypatch.setattr(command, "pull", fake_pull)
    args = ["libtorch", "build", "--on", "lab", "--no-activate", "--json"]
    result = run_fdl(args, cwd=project, env=env)
    assert result.exit_code == 0, result.output
    assert pulled == [(f"{REPO}@{DIGEST}", False)]
    data = json.loads(result.stdout)
    assert data["job_id"] == "42" and data["pulled"] == {"reference": f"{REPO}@{DIGEST}"}
    assert data["installed_here"] is False

    pulled.clear()
    recorded = run_fdl([*args, "--no-pull"], cwd=project, env=env)
    assert recorded.exit_code == 0, recorded.output
    assert pulled == [] and json.loads(recorded.stdout)["reference"] == f"{REPO}@{DIGEST}"


def test_a_variant_the_job_installed_where_this_machine_sees_it_is_not_pulled_again(
    run_fdl, project: Path, env, monkeypatch, tmp_path: Path
) -> None:
    import fdl.cli.commands.libtorch_build_on as command

    tree = project / "libtorch" / "builds" / "x"
    tree.mkdir(parents=True)
    (tree / "variant.json").write_text("{}")
    answer = {
        "variant": "builds/x",
        "path": str(tree),
        "pushed": {"reference": f"{REPO}@{DIGEST}", "digest": DIGEST},
    }
    FakeSlurm(monkeypatch, "COMPLETED", answer)
    monkeypatch.setattr(command, "pull", lambda *a, **k: pytest.fail("pulled again"))
    result = run_fdl(["libtorch", "build", "--on", "lab"], cwd=project, env=env)
    assert result.exit_code == 0, result.output
    assert f"pushed {REPO}@{DIGEST}; installed here by the job: {tree}" in result.stdout
