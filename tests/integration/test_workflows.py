"""The project's own GitHub workflows (``.github/workflows``) against actionlint and GitHub's
workflow schema (check-jsonschema's ``vendor.github-workflows``); they cannot run here.

Both tools come from ``scripts/setup-machine.sh`` (actionlint built by ``go install``,
check-jsonschema in a venv of its own, under ``$FDL_TEST_TOOLS``); without them these tests
skip locally and fail in CI. About 2 s.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.artefacts import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BROKEN = """name: broken
on:
  schedule:
    - cron: "61 5 * * 1"
jobs:
  one:
    runs-on: ubuntu-24.04
    steps:
      - run: echo "${{ steps.nothing.outputs.x }}"
        with-typo: true
"""


def _tool(name: str, *under: str) -> str:
    tools = Path(os.environ.get("FDL_TEST_TOOLS", "/opt/fdl-test-tools"))
    found = shutil.which(name) or shutil.which(name, path=str(tools.joinpath(*under)))
    if not found:
        skip_or_fail(f"no {name}: run scripts/setup-machine.sh (installs it into {tools})")
    return found


@pytest.fixture(scope="module")
def actionlint() -> str:
    return _tool("actionlint", "bin")


@pytest.fixture(scope="module")
def check_jsonschema() -> str:
    return _tool("check-jsonschema", "check-jsonschema", "bin")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_the_workflows_pass_actionlint(actionlint: str, tmp_path: Path) -> None:
    assert any(w.name == "refresh-compat.yml" for w in WORKFLOWS)
    done = _run(actionlint, "-no-color", *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN)
    assert _run(actionlint, "-no-color", str(broken)).returncode != 0  # it can fail


def test_the_workflows_match_githubs_schema(check_jsonschema: str, tmp_path: Path) -> None:
    schema = ("--builtin-schema", "vendor.github-workflows")
    done = _run(check_jsonschema, *schema, *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN.replace("runs-on: ubuntu-24.04", "runs_on: ubuntu-24.04"))
    assert _run(check_jsonschema, *schema, str(broken)).returncode != 0


def test_the_refresh_workflow_runs_options_the_tool_has() -> None:
    """Every ``python -m fdl.refresh`` the workflow runs parses (``--help`` lists its
    options), so the scheduled run does not die on a renamed flag."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "refresh-compat.yml").read_text())
    runs = [
        line.strip()
        for job in workflow["jobs"].values()
        for step in job["steps"]
        for line in str(step.get("run", "")).splitlines()
        if line.strip().startswith("python -m fdl.refresh")
    ]
    assert runs
    shown = _run(sys.executable, "-m", "fdl.refresh", "--help").stdout
    for line in runs:
        words = shlex.split(line.split(">")[0])
        for word in words[words.index("fdl.refresh") + 1 :]:
            assert not word.startswith("-") or word in shown, (word, line)
