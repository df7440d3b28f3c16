"""The fetch phase and the offline compile in the build plan (pure)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fdl.libtorch.build import BuildRequest, Setting, plan_build
from tests.unit.test_one_answer import _facts


def _request(backend: str, **more: object) -> BuildRequest:
    request = BuildRequest(
        archs=Setting("6.1,12.0", "--archs"), backend=Setting(backend, f"--{backend}")
    )
    return replace(request, **{k: Setting(v, f"--{k}") for k, v in more.items()})


def test_docker_fetches_in_its_own_step_and_compiles_offline_on_request(tmp_path: Path) -> None:
    facts = _facts(tmp_path, "570.86")
    online = plan_build(_request("docker"), facts)
    text = online.docker.dockerfile if online.docker else ""
    fetch = text.index("FDL_FETCH_ONLY=1 sh /opt/fdl/build.sh")
    compile_step = text.index("sh /opt/fdl/build.sh", fetch + 10)
    assert fetch < compile_step and "--network=none" not in text
    offline = plan_build(_request("docker", offline=True), facts)
    text = offline.docker.dockerfile if offline.docker else ""
    assert "FROM fetch AS compile" in text and "FDL_OFFLINE=1" in text
    builds = [c.argv for c in offline.commands if c.what.startswith("docker-")]
    assert [a[a.index("build") + 2 :][:2] for a in builds] == [
        ("--target", "fetch"),
        ("--network", "none"),
    ]
    assert not [p for p in offline.problems if p.check == "offline"]
    fresh = plan_build(_request("docker", offline=True, fresh=True), facts)
    assert "FDL_FRESH=1 FDL_FETCH_ONLY=1" in (fresh.docker.dockerfile if fresh.docker else "")


def test_native_fetches_the_optional_dependencies_before_compiling(tmp_path: Path) -> None:
    facts = replace(_facts(tmp_path, None), nvcc=None)
    native = plan_build(replace(_request("native", cpu=True), archs=None), facts)
    whats = [c.what for c in native.commands]
    assert whats.index("clone") < whats.index("fetch") < whats.index("build")
    assert native.command("fetch").argv[-1].endswith("tools/optional_submodules.py")  # type: ignore[union-attr]
    offline = plan_build(replace(_request("native", cpu=True, offline=True), archs=None), facts)
    [warning] = [p for p in offline.problems if p.check == "offline"]
    assert "cannot cut the compile's network" in warning.message and "--docker" in warning.hint


def test_fetch_only_natively_fetches_and_builds_nothing(tmp_path: Path) -> None:
    from fdl.libtorch.build import fetch_sources
    from tests.support.fakes import Completed, FakeRunner

    facts = replace(_facts(tmp_path, None), nvcc=None)
    plan = plan_build(replace(_request("native", cpu=True, offline=True), archs=None), facts)
    source = plan.source_dir
    (source / ".git").mkdir(parents=True)  # the checkout is there: no clone
    (source / "tools").mkdir()
    (source / "tools" / "optional_submodules.py").write_text("")
    if plan.venv is not None:  # the build's venv exists: only its packages are installed
        (plan.venv / "bin").mkdir(parents=True)
        (plan.venv / "bin" / "python").write_text("")
    runner = FakeRunner(default=Completed([], 0, "", ""))
    where = fetch_sources(plan, runner=runner, environ={})
    assert where == source
    ran = [call[-1] for call in runner.calls]
    assert str(source / "tools" / "optional_submodules.py") in ran
    assert not [c for c in runner.calls if c[-1].endswith("build_libtorch.py")]


def test_a_native_cuda_build_names_the_probed_toolkits_compiler(tmp_path: Path) -> None:
    """CUDA_HOME alone is not what newer trees' CMake reads: CUDACXX is the probed
    toolkit's nvcc."""
    facts = _facts(tmp_path, None)
    plan = plan_build(
        BuildRequest(archs=Setting("12.0", "--archs"), backend=Setting("native", "--native")),
        facts,
    )
    assert plan.env["CUDA_HOME"] == "/usr/local/cuda"
    assert plan.env["CUDACXX"] == "/usr/local/cuda/bin/nvcc"


def test_build_dependencies_follow_the_release(tmp_path: Path) -> None:
    facts = _facts(tmp_path, None)
    new = plan_build(replace(_request("docker"), torch=Setting("2.10.0", "--torch")), facts)
    old = plan_build(replace(_request("docker"), torch=Setting("2.7.1", "--torch")), facts)
    assert "six" in new.deps and "setuptools<80" in new.deps and "cmake>=3.27" in new.deps
    assert "six" not in old.deps and "setuptools" in old.deps
    assert len(new.deps) == len(set(new.deps))  # one list per release, not both


def test_a_failed_fetch_names_the_log_and_what_to_do(tmp_path: Path) -> None:
    """The clone and the optional dependencies fail with the log file and their own fix."""
    import pytest

    from fdl.errors import CommandFailed
    from fdl.libtorch.build import fetch_sources
    from tests.support.fakes import Completed, FakeRunner

    facts = replace(_facts(tmp_path, None), nvcc=None)
    plan = plan_build(replace(_request("native", cpu=True), archs=None), facts)
    failing = FakeRunner(default=Completed([], 128, "", "fatal: unable to access"))
    with pytest.raises(CommandFailed) as clone:
        fetch_sources(plan, runner=failing, environ={})
    assert "--source DIR" in str(clone.value.hint) and str(plan.log_file) in clone.value.message
    assert not plan.source_dir.exists()
    assert not plan.source_dir.with_name(plan.source_dir.name + ".partial").exists()
    (plan.source_dir / ".git").mkdir(parents=True)
    (plan.source_dir / "tools").mkdir()
    (plan.source_dir / "tools" / "optional_submodules.py").write_text("")
    with pytest.raises(CommandFailed) as fetch:
        fetch_sources(plan, runner=failing, environ={})
    assert "gitlab.com" in str(fetch.value.hint) and str(plan.log_file) in fetch.value.message
    assert fetch.value.argv[-1].endswith("optional_submodules.py")


def test_offline_turns_off_what_the_configure_step_downloads(tmp_path: Path) -> None:
    """NNPACK's CMake downloads six from PyPI on x86-64: an offline compile cannot, so
    --offline sets USE_NNPACK=0 and says why; an online build keeps PyTorch's default."""
    facts = _facts(tmp_path, "570.86")
    online = plan_build(_request("docker"), facts)
    assert "USE_NNPACK" not in online.env
    assert not [p for p in online.problems if p.check == "offline-switch"]
    offline = plan_build(_request("docker", offline=True), facts)
    assert offline.env["USE_NNPACK"] == "0"
    assert "USE_NNPACK=0" in (offline.docker.dockerfile if offline.docker else "")
    [why] = [p for p in offline.problems if p.check == "offline-switch"]
    assert "--offline turns USE_NNPACK off" in why.message and "six" in why.message
    assert "CUDA tensors" in why.message and why.severity == "warning"
    native = plan_build(replace(_request("native", cpu=True, offline=True), archs=None), facts)
    assert native.env["USE_NNPACK"] == "0"


def test_offline_keeps_a_switch_the_user_set_and_warns(tmp_path: Path) -> None:
    facts = _facts(tmp_path, "570.86")
    request = replace(
        _request("docker", offline=True),
        switches={"USE_NNPACK": Setting("1", "libtorch.build.switches")},
    )
    plan = plan_build(request, facts)
    assert plan.env["USE_NNPACK"] == "1"
    [warning] = [p for p in plan.problems if p.check == "offline-switch"]
    assert warning.message.startswith("libtorch.build.switches: USE_NNPACK=1 with --offline")
    assert "USE_NNPACK=0" in warning.hint
    off = replace(request, switches={"USE_NNPACK": Setting("OFF", "--set")})
    assert not [p for p in plan_build(off, facts).problems if p.check == "offline-switch"]
