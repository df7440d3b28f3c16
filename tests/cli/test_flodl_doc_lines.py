"""Command lines of floDl's documentation (0.5.3: docs/cli.md, ddp-bench/README.md) that the
reference CLI answers and fdl refused: `--no-ansi`, `fdl config show ci`, a bare `fdl
completions`, `fdl config` alone, an option with a default given bare (`--report`)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text("commands:\n  test: {run: cargo test}\n  ddp-bench:\n")
    (tmp_path / "fdl.ci.yml").write_text("commands:\n  test: {run: cargo test --release}\n")
    bench = tmp_path / "ddp-bench"
    bench.mkdir()
    (bench / "fdl.yml").write_text(
        "entry: cargo run --release --\n"
        "schema:\n  options:\n"
        "    report: {type: path, default: runs/report.md, description: write a report}\n"
        "    epochs: {type: int}\n"
    )
    return tmp_path


def test_flodl_documented_lines_answer(run_fdl, project) -> None:
    no_ansi = run_fdl(["--no-ansi", "config", "show"], cwd=project)  # docs/cli.md
    assert no_ansi.exit_code == 0 and "cargo test" in no_ansi.stdout
    shown = run_fdl(["config", "show", "ci", "--no-origin"], cwd=project)  # CHANGELOG 0.5.0
    assert shown.exit_code == 0 and "cargo test --release" in shown.stdout
    clash = run_fdl(["config", "show", "ci", "--env", "other"], cwd=project)
    assert clash.exit_code == 2
    completions = run_fdl(["completions"], cwd=project)  # bash, as floDl's
    assert completions.exit_code == 0 and "bash completion" in completions.stdout
    usage = run_fdl(["config"], cwd=project)  # the group's usage, not an error
    assert usage.exit_code == 0 and usage.stdout.startswith("Usage: fdl config")


def test_an_option_with_a_default_may_be_given_bare(run_fdl, project) -> None:
    """ddp-bench/README.md: `fdl ddp-bench --report` (the program's default path)."""
    result = run_fdl(["ddp-bench", "--report", "--dry-run"], cwd=project)
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("--report")
    # without a default a value is still required
    missing = run_fdl(["ddp-bench", "--epochs", "--dry-run"], cwd=project)
    assert missing.exit_code == 2 and "--epochs needs a value" in missing.stderr
