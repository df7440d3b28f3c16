"""``fdl libtorch build --on TARGET`` against the one-node SLURM cluster of
scripts/setup-slurm.sh and the registry of scripts/setup-registry.sh: the fake PyTorch tree
built by a SLURM job, pushed, and pulled on "another machine"; a cancelled build job ends
cleanly (fdl gets SIGTERM, no answer is left)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fdl.deploy import (
    FINISHED,
    DeployTarget,
    JobFile,
    build_job_dir,
    cancel_job,
    job_state,
    plan_build_job,
    submit_script,
)
from fdl.runner import SubprocessRunner
from tests.integration.test_deploy_slurm import slurm  # noqa: F401 (a fixture)
from tests.integration.test_libtorch_registry import (  # noqa: F401 (fixtures)
    _files,
    machines,
    registry,
    repo,
)


def _project(root: Path, repository: str) -> Path:
    root.mkdir(parents=True)
    (root / "fdl.yml").write_text(
        f"libtorch:\n  registry: {repository}\n"
        "deploy:\n  local:\n    kind: slurm\n    time: '00:20:00'\n",
        encoding="utf-8",
    )
    return root


@pytest.mark.slow
def test_build_on_slurm_builds_pushes_and_another_machine_pulls(
    run_fdl,
    slurm: None,  # noqa: F811
    machines,  # noqa: F811
    repo: str,  # noqa: F811
) -> None:
    from tests.support.build_helpers import copy_source

    builder, teammate = machines
    project = _project(builder.root / "project", repo)
    source = copy_source(builder.root / "pytorch")
    env = {**builder.env, "PATH": os.environ["PATH"], "FAKE_TORCH_UNITS": "4"}
    args = [
        "--on",
        "local",
        "--cpu",
        "--native",
        "--source",
        str(source),
        "--disk-gb",
        "1",
        "--no-flash-attention",
    ]
    built = run_fdl(["libtorch", "build", *args, "--json"], cwd=project, env=env)
    assert built.exit_code == 0, built.output
    data = json.loads(built.stdout)
    assert data["target"] == "local" and not data["pulled_instead"]
    assert data["reference"] == f"{repo}@{data['digest']}"
    # The job ran in the project: the variant is in its libtorch/, which this machine sees.
    assert data["installed_here"] and data["pulled"] is None
    tree = Path(data["path"])
    assert tree.parent.parent == project / "libtorch"
    assert f"submitted SLURM job {data['job_id']} to local" in built.stderr
    answer = build_job_dir(project / ".fdl" / "deploy") / f"{data['job_id']}.json"
    assert json.loads(answer.read_text())["pushed"]["digest"] == data["digest"]
    # `fdl deploy` knows the job: its record is the target's last.
    status = run_fdl(["deploy", "status", "local", "--json"], cwd=project, env=env)
    assert status.exit_code == 0 and data["job_id"] in status.stdout, status.output

    pulled = run_fdl(
        ["libtorch", "pull", data["reference"], "--json"], cwd=teammate.cwd, env=teammate.env
    )
    assert pulled.exit_code == 0, pulled.output
    installed = teammate.context().libtorch_dir / json.loads(pulled.stdout)["variant"]
    assert _files(installed) == _files(tree)
    verify = run_fdl(["libtorch", "verify"], cwd=teammate.cwd, env=teammate.env)
    assert verify.exit_code == 0, verify.output


def test_a_cancelled_build_job_stops_fdl_and_leaves_no_answer(
    slurm: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The job script as planned, with a stand-in for fdl that waits and records SIGTERM:
    scancel reaches it, the job shell waits for it and removes the partial answer."""
    runner = SubprocessRunner()
    mark = tmp_path / "terminated"
    fake = tmp_path / "fdl"
    fake.write_text(
        "#!/bin/bash\n"
        f"trap 'echo term > {mark}; exit 143' TERM\n"
        'echo "{"\necho started >&2\nsleep 300 &\nwait "$!"\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    state_dir = tmp_path / "state"
    job = plan_build_job(
        DeployTarget("local", "slurm"),
        {"cpu": (True, "--cpu")},
        registry="127.0.0.1:5000/team/libtorch",
        state_dir=state_dir,
        workdir=tmp_path,
        fdl=(str(fake),),
    )
    built = JobFile(job.text, job.filename, job.job_name, "libtorch build")
    record = submit_script(job.target, built, state_dir, runner)
    output = Path(record.output)
    for _ in range(600):  # until the stand-in runs (or the job ended early: asserted below)
        if "started" in (output.read_text() if output.is_file() else ""):
            break
        if job_state(record, runner) in FINISHED:
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert "started" in output.read_text(), output.read_text()
    assert cancel_job(record, runner) is None
    states = set()
    for _ in range(600):
        states.add(job_state(record, runner))
        if states & FINISHED:
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert "CANCELLED" in states
    for _ in range(100):  # the job's processes finish their traps within KillWait
        if mark.is_file():
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert mark.read_text().strip() == "term"
    answer = job.result_path(record.job_id)
    partial = answer.with_name(answer.name + ".part")
    for _ in range(100):  # the job shell removes it once the stand-in has ended
        if not partial.exists():
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert not partial.exists() and not answer.exists()


def test_the_job_of_a_hostile_directory_runs_there_and_writes_its_output_there(
    slurm: None,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """The #SBATCH lines fdl writes for a project whose path holds a space, a quote and a
    `%`, read by the real sbatch: the job runs in that directory and its output lands
    beside the job records, under the literal name (the build itself is the test above)."""
    root = tmp_path / "my lab's 100% run"
    state = root / ".fdl" / "deploy"
    state.mkdir(parents=True)
    job = plan_build_job(
        DeployTarget("local", "slurm", time="00:02:00", output="out-%j.log"),
        {"cpu": (True, "--cpu")},
        registry="127.0.0.1:5000/t/l",
        state_dir=state,
        workdir=root,
        fdl=("true",),
    )
    directives = [line for line in job.text.splitlines() if line.startswith("#SBATCH")]
    script = root / "probe.sh"
    script.write_text("\n".join(["#!/bin/bash", *directives, 'echo "ran in $PWD"', ""]))
    done = subprocess.run(
        ["sbatch", "--wait", "--parsable", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().split(";")[0]
    assert (state / f"out-{job_id}.log").read_text() == f"ran in {root}\n"
