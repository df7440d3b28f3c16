"""The plan of a source build as a person reads it (``fdl libtorch build --dry-run``) and
its estimate block in ``--json``, for torch 2.10.0 on sm_61 + sm_120 (rewrite with
FDL_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from fdl.cli.commands.libtorch_build import render_plan
from fdl.libtorch.build import BuildRequest, MachineFacts, Setting, plan_build
from tests.support.golden import assert_golden
from tests.unit.test_one_answer import _facts

CASES = {
    "docker": {},
    "docker_offline": {"offline": True},
    "docker_no_flash": {"flash_attention": False},
}


def _plan_text(tmp_path: Path, **more: object) -> tuple[str, str]:
    facts: MachineFacts = replace(_facts(tmp_path, "570.86"), cores=8, ram_gb=32.0)
    request = BuildRequest(
        archs=Setting("6.1;12.0", "--archs"),
        backend=Setting("docker", "--docker"),
        torch=Setting("2.10.0", "--torch"),
    )
    request = replace(request, **{k: Setting(v, f"--{k}") for k, v in more.items()})
    plan = plan_build(request, facts)
    text = render_plan(plan, dry_run=True).replace(str(tmp_path), "<tmp>")
    # the configuration key hashes the paths too
    text = re.sub(r"sm61-sm120-[0-9a-f]{12}", "sm61-sm120-<key>", text)
    estimates = json.dumps(plan.to_json()["estimates"], indent=2, sort_keys=True) + "\n"
    return text, estimates


@pytest.mark.parametrize("name", CASES)
def test_plan_of_pascal_blackwell_on_torch_2_10(name: str, tmp_path: Path) -> None:
    text, estimates = _plan_text(tmp_path, **CASES[name])
    assert_golden(f"build/plan_{name}.txt", text)
    assert_golden(f"build/plan_{name}.estimates.json", estimates)
