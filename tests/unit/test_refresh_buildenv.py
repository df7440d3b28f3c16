"""`python -m fdl.refresh buildenv`: where a PyTorch tree honours each input of a plan,
checked on the contract tree (tests/fixtures/fake-pytorch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fdl.refresh._honoured import TREE_FILES, where_honoured

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "fake-pytorch"


def test_each_input_is_found_at_the_line_that_honours_it() -> None:
    names = ["TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "USE_CUDA", "CMAKE_C_COMPILER_LAUNCHER"]
    rows = {r.name: r for r in where_honoured(TREE, [*names, "CCACHE_DIR"], TREE_FILES)}
    arch = rows["TORCH_CUDA_ARCH_LIST"]
    assert arch.how == "reads the environment" and "$ENV{TORCH_CUDA_ARCH_LIST}" in arch.text
    line = int(str(arch.where).rsplit(":", 1)[1])
    assert "$ENV{TORCH_CUDA_ARCH_LIST}" in (TREE / "CMakeLists.txt").read_text().splitlines()[
        line - 1
    ]
    assert rows["MAX_JOBS"].where is not None
    assert rows["MAX_JOBS"].where.startswith("tools/build_libtorch.py:")
    assert rows["USE_CUDA"].how == "CMake option"
    assert rows["CMAKE_C_COMPILER_LAUNCHER"].how.startswith("passed to CMake by the prefix rule")
    assert (rows["CCACHE_DIR"].how, rows["CCACHE_DIR"].where) == ("ccache", None)
    assert rows["tools/build_libtorch.py"].how == "runs it"
    assert "requirements.txt" not in rows  # the contract tree has none: left out


def test_a_variable_no_file_reads_is_reported_and_fails_the_check(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"env": {"TORCH_CUDA_ARCH_LIST": "6.1", "FDL_NO_SUCH": "1"}}))
    done = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan), "--source", str(TREE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "| `FDL_NO_SUCH` | 1 | - | no build file reads it | not honoured |" in done.stdout
    plan.write_text(json.dumps({"env": {"TORCH_CUDA_ARCH_LIST": "6.1"}}))
    ok = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan), "--source", str(TREE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "buildenv", str(plan), "--source", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "not a PyTorch source tree" in bad.stderr
