"""Golden tests of `fdl config show` and `fdl config explain` output.

The fixture project has a base (fdl.yml) that inherits defaults/common.yml,
two overlays (fdl.gpu.yml inherits fdl.ci.yml), an FDL__ environment variable
and a --set option: every layer kind at once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.golden import assert_golden

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "manifest-project"
LAYERS_ARGS = ["--env", "gpu", "--set", "commands.fmt.run=cargo fmt"]
LAYERS_ENV = {"FDL__COMMANDS__LINT__RUN": "cargo clippy --all-targets"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.mark.parametrize(
    ("name", "args", "env"),
    [
        ("show_base.txt", ["config", "show"], {}),
        ("show_ci.txt", ["--env", "ci", "config", "show"], {}),
        ("show_all_layers.txt", [*LAYERS_ARGS, "config", "show"], LAYERS_ENV),
        (
            "show_all_layers_no_origin.txt",
            [*LAYERS_ARGS, "config", "show", "--no-origin"],
            LAYERS_ENV,
        ),
        ("explain_all_layers.txt", [*LAYERS_ARGS, "config", "explain"], LAYERS_ENV),
        (
            "explain_test_run.txt",
            [*LAYERS_ARGS, "config", "--explain", "commands.test.run"],
            LAYERS_ENV,
        ),
        ("layers_gpu.txt", [*LAYERS_ARGS, "config", "layers"], LAYERS_ENV),
    ],
)
def test_text_output(
    run_fdl, project: Path, name: str, args: list[str], env: dict[str, str]
) -> None:
    result = run_fdl(args, cwd=project, env=env)
    assert result.exit_code == 0, result.stderr
    assert_golden(f"manifest/{name}", result.stdout)


def test_explain_json(run_fdl, project: Path) -> None:
    result = run_fdl([*LAYERS_ARGS, "config", "explain", "--json"], cwd=project, env=LAYERS_ENV)
    assert result.exit_code == 0, result.stderr
    text = result.stdout.replace(str(project), "<project>")
    assert_golden("manifest/explain_all_layers.json", text)
    data = json.loads(result.stdout)
    by_key = {item["key"]: item for item in data}
    run = by_key["commands.test.run"]
    assert run["winner"]["origin"]["source"] == "fdl.gpu.yml"
    assert [c["origin"]["source"] for c in run["overridden"]] == ["fdl.ci.yml", "fdl.yml"]
    assert by_key["commands.bench"]["present"] is False
    assert by_key["commands.bench"]["removed_by"]["origin"]["source"] == "fdl.ci.yml"


def test_show_json_is_the_merged_data(run_fdl, project: Path) -> None:
    result = run_fdl([*LAYERS_ARGS, "config", "show", "--json"], cwd=project, env=LAYERS_ENV)
    data = json.loads(result.stdout)
    assert data["commands"]["test"] == {
        "description": "Run the tests",
        "run": "cargo test --release --features cuda",
        "append": "-- --nocapture",
    }
    assert "bench" not in data["commands"]
    assert data["commands"]["lint"]["run"] == "cargo clippy --all-targets"
    assert data["commands"]["fmt"]["run"] == "cargo fmt"
