"""Deploy backends: every kind the manifest admits has one, and a backend added to the
table (one module) is what plans, submits, reads back and cancels its targets' jobs."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import fdl.deploy._backend as table
from fdl.deploy import (
    BACKENDS,
    DeployTarget,
    GpuOffer,
    ImageArchs,
    JobFile,
    JobRecord,
    JobStatus,
    backend,
    cancel_of,
    follow_job,
    job_completed,
    job_status_of,
    logs_of,
    plan_deploy,
    read_record,
    submit_plan,
)
from fdl.deploy._backend import JobInputs
from fdl.deploy._record import write_record
from fdl.manifest.sections.deploy import KINDS
from fdl.runner import Runner
from tests.support.fakes import FakeRunner

CU130 = ImageArchs("precompiled/cu130", "13.0", ("sm_90", "compute_120"), "2.13.0")
H100 = GpuOffer("9.0", type="h100")
L4 = GpuOffer("8.9", type="l4")


def test_every_kind_the_manifest_admits_has_a_backend_of_that_name() -> None:
    assert sorted(BACKENDS) == sorted(KINDS)
    for kind in KINDS:
        found = backend(kind)
        assert found.name == kind
        assert all(record.partition("-")[0] == kind for record in found.record_ids)


class _Toy:
    """A backend as a new module would hold it: jobs kept in a dict."""

    name = "toy"
    suffix = ".toy"
    lands_anywhere = False
    carries_profile_mounts = False
    done = "DONE"
    record_ids: Mapping[str, re.Pattern[str]] = {"toy": re.compile(r"t[0-9]+")}

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}

    def check_fields(self, manifest: Any, key: str, raw: Mapping[str, Any]) -> None:
        pass

    def secret_fix(self, key: str, name: str) -> str:
        return f"ask the toy for {name}"

    def runs_local_images(self, target: DeployTarget) -> bool:
        return True

    def puller(self, target: DeployTarget) -> str:
        return "kubernetes"

    def check(self, target: DeployTarget, runner: Runner) -> list[str]:
        return []

    def render(self, target: DeployTarget, job: JobInputs) -> str:
        allowed = " ".join(g.name for g in job.allowed)
        return f"run {job.image} as {job.job_name} on {allowed}\n"

    def submit(self, target: DeployTarget, job: JobFile, state_dir: Path, runner: Runner) -> JobRecord:  # fmt: skip
        record = JobRecord(target.name, "toy", "t1", job.image, job.filename, "-")
        self.jobs[record.job_id] = "RUNNING"
        write_record(state_dir, record)
        return record

    def status(self, record: JobRecord, runner: Runner, context: str | None) -> JobStatus:
        return JobStatus(self.jobs[record.job_id])

    def logs(self, record: JobRecord, runner: Runner, context: str | None, *, follow: bool) -> Iterator[str]:  # fmt: skip
        return iter(["hello from the toy"])

    def wait(self, record: JobRecord, runner: Runner, context: str | None, on_line: Callable[[str], None]) -> str:  # fmt: skip
        on_line("hello from the toy")
        self.jobs[record.job_id] = "DONE"
        return "DONE"

    def cancel(self, record: JobRecord, runner: Runner, context: str | None) -> str | None:
        self.jobs[record.job_id] = "CANCELLED"
        return None


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> _Toy:
    module = types.ModuleType("tests_toy_backend")
    module.BACKEND = _Toy()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests_toy_backend", module)
    monkeypatch.setitem(table.BACKENDS, "toy", "tests_toy_backend")
    return module.BACKEND  # type: ignore[attr-defined,no-any-return]


def test_a_backend_in_the_table_plans_submits_and_follows_its_jobs(
    toy: _Toy, tmp_path: Path
) -> None:
    target = DeployTarget("play", "toy", gpus_per_node=1, gpus=(H100, L4))
    plan = plan_deploy(
        target,
        project="p",
        local_image="p-train:latest",
        archs=CU130,
        entrypoint=["/app/bin/p"],
        args=[],
        digest="sha256:" + "1" * 64,
    )
    # Placement as the backend says: pinned to the covered GPU, not refused for the L4.
    assert plan.text == "run sha256:" + "1" * 64 + " as fdl-p-play on h100\n"
    assert plan.filename == "play.toy" and plan.to_json()["kind"] == "toy"
    record = submit_plan(plan, tmp_path, FakeRunner())
    assert read_record(tmp_path, "play") == record
    assert job_status_of(record).state == "RUNNING"
    assert list(logs_of(record)) == ["hello from the toy"]
    lines: list[str] = []
    state = follow_job(record, lines.append)
    assert (state, lines) == ("DONE", ["hello from the toy"]) and job_completed(record, state)
    assert cancel_of(record) is None and toy.jobs["t1"] == "CANCELLED"


def test_a_record_of_a_kind_no_backend_writes_is_refused(tmp_path: Path) -> None:
    from fdl.errors import EnvironmentProblem

    write_record(tmp_path, JobRecord("play", "toy", "t1", "img", "play.toy", "-"))
    with pytest.raises(EnvironmentProblem, match="unknown kind 'toy'"):
        read_record(tmp_path, "play")


def test_the_packages_names_are_where_its_table_says() -> None:
    from importlib import import_module

    import fdl.deploy

    homes = fdl.deploy._HOMES
    assert sorted(fdl.deploy.__all__) == sorted(homes)
    for name, home in homes.items():
        assert name in import_module(f"fdl.deploy.{home}").__all__, (name, home)


def test_a_slurm_plan_loads_no_kubernetes_module() -> None:
    import subprocess

    code = (
        "import sys\n"
        "from fdl.deploy import DeployTarget, ImageArchs, plan_deploy\n"
        "plan_deploy(DeployTarget('lab', 'slurm'), project='p', local_image='p:1',\n"
        "            archs=ImageArchs('precompiled/cpu', None, ()), entrypoint=[], args=[])\n"
        "print(sorted(m for m in sys.modules if m.startswith('fdl.deploy._')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout
    assert "fdl.deploy._slurm_backend" in loaded and "fdl.deploy._slurm'" in loaded
    assert "_kube" not in loaded, loaded
