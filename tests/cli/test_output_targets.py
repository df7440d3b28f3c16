"""Every `-o` target: fdl writes only a new file or one it wrote, never a FIFO, a device or
/proc, and ends each refusal in exit 2 with the fix (no hang, no internal error). Each
data-loss case has a decoy whose bytes must be unchanged. FIFO cases run in a subprocess
with a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import run_fdl_process
from tests.support.ci import ci_project
from tests.support.images import make_project, make_variant

DECOY = b"# the user's own file\n"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, "images:\n  train: {}\n")
    make_variant(project)
    return project


@pytest.mark.parametrize("target", ["fifo", "/dev/null", "/proc/self", "file", "fifo-inside"])
def test_image_render_refuses_what_is_not_a_directory_of_files(
    project: Path, tmp_path: Path, target: str
) -> None:
    out = tmp_path / "out"
    if target == "fifo":
        where = str(_fifo(out))
    elif target == "file":
        out.write_bytes(DECOY)
        where = str(out)
    elif target == "fifo-inside":
        out.mkdir()
        _fifo(out / "train.Dockerfile")
        where = str(out)
    else:
        where = target
    result = run_fdl_process(["image", "render", "-o", where], cwd=project, timeout=60)
    assert result.exit_code == 2, result.output
    assert "fix:" in result.output
    if target == "file":
        assert out.read_bytes() == DECOY


def test_ci_generate_refuses_proc(tmp_path: Path) -> None:
    project = ci_project(tmp_path)
    result = run_fdl_process(["ci", "generate", "-o", "/proc/self"], cwd=project, timeout=60)
    assert result.exit_code == 2, result.output
    assert "under /proc" in result.output


def test_config_schema_writes_only_its_own_file(run_fdl, project: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mine = tmp_path / "notes.json"
    mine.write_bytes(DECOY)
    refused = run_fdl(["config", "schema", "-o", str(mine)], cwd=project)
    assert refused.exit_code == 2 and "not a schema fdl wrote" in refused.output
    assert mine.read_bytes() == DECOY
    schema = tmp_path / "fdl.schema.json"
    for _ in range(2):  # new, then its own again
        assert run_fdl(["config", "schema", "-o", str(schema)], cwd=project).exit_code == 0
    fifo = _fifo(tmp_path / "pipe")
    result = run_fdl_process(["config", "schema", "-o", str(fifo)], cwd=project, timeout=60)
    assert result.exit_code == 2 and "FIFO" in result.output


BENCH = f"""\
bench:
  epoch.png:
    run: [{sys.executable}, prog.py]
    rounds: 2
    warmup: 0
    figures: {{ms: 'ms: ([0-9.]+)'}}
"""


@pytest.fixture
def bench_project(tmp_path: Path) -> Path:
    (tmp_path / "prog.py").write_text("print('ms: 1.5')\n")
    (tmp_path / "fdl.yml").write_text(BENCH)
    return tmp_path


def test_bench_run_appends_only_to_its_results(run_fdl, bench_project: Path) -> None:  # type: ignore[no-untyped-def]
    readme = bench_project / "README.md"
    readme.write_bytes(DECOY)
    for args in (["-o", "README.md"], ["-o", "README.md", "--dry-run"]):
        result = run_fdl(["bench", "run", *args], cwd=bench_project)
        assert result.exit_code == 2 and "not a results file" in result.output
    assert readme.read_bytes() == DECOY
    assert run_fdl(["bench", "run", "-o", "out.jsonl"], cwd=bench_project).exit_code == 0
    assert run_fdl(["bench", "run", "-o", "out.jsonl"], cwd=bench_project).exit_code == 0
    fifo = _fifo(bench_project / "pipe")
    result = run_fdl_process(["bench", "run", "-o", str(fifo)], cwd=bench_project, timeout=60)
    assert result.exit_code == 2 and "FIFO" in result.output


def test_bench_plot_replaces_only_its_own_png(run_fdl, bench_project: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    assert run_fdl(["bench", "run", "-o", "out.jsonl"], cwd=bench_project).exit_code == 0
    plots = bench_project / "plots"
    plots.mkdir()
    png = plots / "epoch.png"  # the benchmark is called epoch.png: no second suffix
    png.write_bytes(DECOY)
    result = run_fdl(["bench", "report", "out.jsonl", "--plot", "plots"], cwd=bench_project)
    assert result.exit_code == 2 and "not drawn by fdl" in result.output
    assert png.read_bytes() == DECOY
    png.unlink()
    for _ in range(2):  # drawn, then replaced (its own)
        result = run_fdl(["bench", "report", "out.jsonl", "--plot", "plots"], cwd=bench_project)
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in plots.iterdir()) == ["epoch.png"]
    assert png.read_bytes().startswith(b"\x89PNG")
