"""An interrupted native build resumes: the re-run compiles only what was not finished.

fdl runs as a real process in its own session; Ctrl-C is simulated by SIGINT to the whole
process group (what a terminal does). No compiler cache is used, so only the build tree
can explain the skipped objects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fdl.libtorch.build import compiled_objects
from tests.conftest import REPO
from tests.support.build_helpers import copy_source

pytestmark = pytest.mark.slow


def _environ(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDL_", "USE_", "BUILD_"))}
    env.update(
        PYTHONPATH=str(REPO),
        FDL_HOME=str(base / "home"),
        FDL_CACHE_DIR=str(base / "cache"),
        FAKE_TORCH_UNITS="12",
        NO_COLOR="1",
    )
    return env


def test_interrupted_build_resumes_without_recompiling(tmp_path: Path) -> None:
    source = copy_source(tmp_path / "pytorch")
    args = [
        sys.executable,
        "-m",
        "fdl",
        "libtorch",
        "build",
        "--cpu",
        "--native",
        "--source",
        str(source),
        "--disk-gb",
        "1",
        "--cache",
        "none",
        "--jobs",
        "1",
    ]
    env = _environ(tmp_path)
    plan = json.loads(
        subprocess.run(
            [*args, "--dry-run", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout
    )
    log = Path(plan["paths"]["log"])
    build_dir = Path(plan["paths"]["work"]) / "build"

    first = subprocess.Popen(
        args,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if len(compiled_objects(text.splitlines())) >= 6:
            break
        assert first.poll() is None, "the build finished before it could be interrupted"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGINT)
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 130, stderr
    assert "re-run the same command to resume" in stderr
    finished = {str(p.relative_to(build_dir)) for p in build_dir.rglob("*.o")}
    first_run = compiled_objects(log.read_text(errors="replace").splitlines())
    assert finished, "no object was finished before the interrupt"
    offset = log.stat().st_size

    second = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert second.returncode == 0, second.stderr
    rerun_log = log.read_text(errors="replace")[offset:]
    assert "Reusing the CMake configuration" in rerun_log
    recompiled = set(compiled_objects(rerun_log.splitlines()))
    assert recompiled, f"the re-run compiled nothing: {rerun_log[-3000:]}"
    assert not (recompiled & finished), f"finished objects compiled again: {recompiled & finished}"
    total = recompiled | finished
    assert len(recompiled) < len(total)
    print(
        f"first run started {len(first_run)} compiles, {len(finished)} finished; "
        f"the re-run compiled {len(recompiled)} of {len(total)}"
    )
