"""FDL_REQUIRE_ALL=1 (set by .ci/run) turns every skip for what the machine must have into a
failure (issue 46: about 60 tests skipped while CI stayed green when the registry or SLURM
did not start); the skips of tests/support/machine.py's SKIPS_THAT_STAY stay skips. Checked
on a small suite run in a pytest of its own, with the suite's conftest as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.machine import SKIPS_THAT_STAY

SUITE = {
    "test_services.py": """
import pytest

def test_registry():
    pytest.skip("no registry answers on 127.0.0.1:5000; run scripts/setup-registry.sh")

@pytest.mark.skipif(True, reason="no SLURM here")
def test_slurm():
    pass

def test_hint():
    pytest.skip("not a runnable form: fdl <command>")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known():
    assert False

def test_ok():
    pass
""",
    "test_a_module.py": """
import pytest

pytest.importorskip("a_module_this_machine_lacks")

def test_never():
    pass
""",
}


def _run(tmp_path: Path, require_all: str) -> subprocess.CompletedProcess[str]:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL_REQUIRE")}
    env.update(FDL_REQUIRE_ALL=require_all, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_without_the_switch_a_missing_service_skips(tmp_path: Path) -> None:
    done = _run(tmp_path, "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 4 skipped, 1 xfailed" in done.stdout, done.stdout


def test_with_the_switch_every_skip_but_the_listed_ones_fails(tmp_path: Path) -> None:
    done = _run(tmp_path, "1")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "1 failed, 1 passed, 2 skipped, 1 xfailed, 1 error" in out, out  # module: at the end
    assert "FAILED test_services.py::test_registry - skipped, but this machine must" in out
    assert "ERROR test_services.py::test_slurm - skipped, but this machine must" in out
    assert "SKIPPED [1] test_services.py:12: not a runnable form" in out  # it stays
    assert "skipped whole, but this machine must have it (FDL_REQUIRE_ALL=1)" in out
    assert "test_a_module.py: Skipped: could not import 'a_module_this_machine_lacks'" in out


@pytest.mark.parametrize(("text", "why"), SKIPS_THAT_STAY)
def test_each_skip_that_stays_is_in_the_manual(text: str, why: str) -> None:
    page = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    development = " ".join(page.split())  # lines rewrapped
    assert text in development, f"docs/development.md: list {text!r} ({why})"


def test_ci_sets_the_switch() -> None:
    assert "export FDL_REQUIRE_ALL=1" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
