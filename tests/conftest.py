"""Shared fixtures: the docker engine policy, running fdl in and out of process."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.machine import REQUIRE_ALL, require_all, required, stays

REPO = Path(__file__).resolve().parent.parent
# busy_cores: a `stress`-like load for the tests of leftover processes and timing
# schedule: heavy files first under pytest-xdist (scripts/test.sh runs two workers);
# downloads: what the tests fetched, listed at the end
pytest_plugins = ["tests.support.load", "tests.support.schedule", "tests.support.downloads"]
BASE_IMAGE = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")
# Tests fake nvidia-smi on PATH: NVML (a real GPU's driver library, on machines that have
# one) must not answer instead. fdl processes the tests start inherit it.
os.environ["FDL_NVML"] = "0"


def docker_required() -> bool:
    """CI sets FDL_REQUIRE_ALL=1 (or FDL_REQUIRE_DOCKER=1): docker tests then fail instead
    of skipping."""
    return required("docker")


def _docker_problem() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI on PATH"
    try:
        proc = subprocess.run(
            [docker, "info"], capture_output=True, text=True, timeout=20, check=False
        )
    except subprocess.TimeoutExpired:
        return "`docker info` timed out"
    if proc.returncode != 0:
        return "no docker engine answers (`docker info` failed)"
    image = subprocess.run(
        [docker, "image", "inspect", BASE_IMAGE], capture_output=True, text=True, check=False
    )
    if image.returncode != 0:
        return f"base image {BASE_IMAGE} is missing (bash scripts/setup-machine.sh makes it)"
    return None


_DOCKER_STATE: list[str | None] = []
# Images made on purpose to be reused by later runs (base images, the Rust toolchain).
_KEPT_IMAGES = ("fdl-test/", "fdl-rust:1.")
_IMAGES_BEFORE: set[str] = set()


def _images() -> dict[str, list[str]]:
    """Image id -> its tags (none for a dangling image)."""
    listed = subprocess.run(
        ["docker", "image", "ls", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    images: dict[str, list[str]] = {}
    for line in listed.stdout.splitlines():
        image, _, tag = line.partition(" ")
        images.setdefault(image, [])
        if tag and tag != "<none>:<none>":
            images[image].append(tag)
    return images


def _snapshot_docker() -> None:
    """Ask once whether docker answers, and note the images there before the tests."""
    if not _DOCKER_STATE:
        _DOCKER_STATE.append(_docker_problem())
        if _DOCKER_STATE[0] is None:
            _IMAGES_BEFORE.update(_images())


def pytest_sessionstart(session: pytest.Session) -> None:
    # Under pytest-xdist the tests run in the workers and the controller cleans up at the
    # end (pytest_sessionfinish): it notes the images there before any worker starts.
    config = session.config
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if controller and shutil.which("docker") is not None:
        _snapshot_docker()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    _snapshot_docker()
    problem = _DOCKER_STATE[0]
    if problem is None:
        return
    if docker_required():
        pytest.fail(f"docker is required (FDL_REQUIRE_DOCKER=1) but {problem}", pytrace=False)
    pytest.skip(problem)


def _refused_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Under FDL_REQUIRE_ALL=1 a skip (of a test or of a whole module) is a failure, unless
    its reason is one of tests/support/machine.py's SKIPS_THAT_STAY."""
    if not (report.skipped and require_all()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if stays(reason):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped, but this machine must have it ({REQUIRE_ALL}=1): {reason}\n"
        "bash scripts/setup-machine.sh sets the machine up; the skips that may stay are "
        "tests/support/machine.py's SKIPS_THAT_STAY"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    _refused_skip(outcome.get_result())


# Modules skipped whole (a missing import) under FDL_REQUIRE_ALL=1: a failed collection
# would stop the run, so they are named at the end and fail it there.
_REFUSED_MODULES: list[str] = []


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # called in the run's own process, with pytest-xdist too (its workers send reports)
    if report.skipped and require_all():
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if not stays(reason):
            _REFUSED_MODULES.append(f"{report.nodeid}: {reason}")


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _REFUSED_MODULES:
        terminalreporter.section(f"skipped whole, but this machine must have it ({REQUIRE_ALL}=1)")
        for line in _REFUSED_MODULES:
            terminalreporter.line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remove the images this run built (builders, variants, dangling stages): each run
    makes new ones (their tags carry the test's temporary paths), and a few runs filled the
    disk until builds were refused for want of space. A module skipped whole under
    FDL_REQUIRE_ALL=1 fails the run."""
    if _REFUSED_MODULES and session.exitstatus in (0, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not _DOCKER_STATE or _DOCKER_STATE[0] is not None or hasattr(session.config, "workerinput"):
        return
    made = {i: tags for i, tags in _images().items() if i not in _IMAGES_BEFORE}
    doomed = [
        name
        for image, tags in made.items()
        if not any(t.startswith(_KEPT_IMAGES) for t in tags)
        for name in (tags or [image])
    ]
    if doomed:
        subprocess.run(
            ["docker", "image", "rm", "--force", *doomed],
            capture_output=True,
            timeout=600,
            check=False,
        )


# Property tests draw the same examples on every run in CI (`.ci/run` sets
# FDL_REQUIRE_DOCKER): a build must not pass or fail by the luck of the draw. Run them
# without it (locally) to explore new examples; what they find is kept in .hypothesis/.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("FDL_REQUIRE_DOCKER") or require_all():
    _hypothesis_settings.load_profile("ci")


@pytest.fixture
def base_image() -> str:
    """The locally made Debian base image (no registry pulls here)."""
    return BASE_IMAGE


@dataclass
class Result:
    """What an fdl invocation did."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def run_fdl(monkeypatch: pytest.MonkeyPatch):
    """Run ``fdl`` in process: ``run_fdl(["config", "show"], cwd=path, env={...})``."""
    from fdl.cli import _console, main

    def invoke(
        args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as patch:
            if cwd is not None:
                patch.chdir(cwd)
            for key in [k for k in os.environ if k.startswith("FDL__") or k == "FDL_ENV"]:
                patch.delenv(key)
            for key, value in (env or {}).items():
                patch.setenv(key, value)
            patch.setenv("NO_COLOR", "1")
            patch.setattr(sys, "stdout", out)
            patch.setattr(sys, "stderr", err)
            patch.setattr(_console.sys, "stdout", out)
            patch.setattr(_console.sys, "stderr", err)
            code = main(args)
        return Result(code, out.getvalue(), err.getvalue())

    return invoke


def run_fdl_process(
    args: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Result:
    """Run ``python -m fdl`` as a subprocess with this checkout importable."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FDL__") and k != "FDL_ENV"}
    environ["PYTHONPATH"] = str(REPO) + os.pathsep + environ.get("PYTHONPATH", "")
    environ["NO_COLOR"] = "1"
    environ.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "fdl", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def fdl_process():
    """Run ``python -m fdl`` as a subprocess with this checkout importable."""
    return run_fdl_process


@pytest.fixture(autouse=True)
def _no_pypi_by_accident(monkeypatch: pytest.MonkeyPatch):
    """No test reaches the real PyPI unless it says so: a release newer than the tables is
    read (fdl.cli._learn) from an address that refuses at once, and the check for newer
    releases (fdl.cli._newer) is off; the tests of both set their own."""
    monkeypatch.setenv("FDL_PYPI_URL", "http://127.0.0.1:9/pypi")
    monkeypatch.setenv("FDL_COMPAT_MAX_AGE_DAYS", "0")


@pytest.fixture(autouse=True)
def _process_defaults_restored():
    """Every test leaves the process-wide runner and engine as it found them (a test that
    installs a fake one cannot leak it into the next test of the same worker)."""
    import fdl.engine as engine_module
    from fdl import runner as runner_module

    runners, engines = list(runner_module._DEFAULT), list(engine_module._DEFAULT)
    yield
    runner_module._DEFAULT[:] = runners
    engine_module._DEFAULT[:] = engines
