"""Hostile manifests and overrides end in a documented exit code (issue 11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fdl.yml").write_text("description: x\n")
    return tmp_path


@pytest.mark.parametrize("literal", ["1" * 5000, "-" + "9" * 4301, "0x" + "f" * 4000])
def test_integer_over_the_conversion_limit_is_a_located_manifest_error(
    run_fdl, project: Path, literal: str
) -> None:
    (project / "fdl.yml").write_text(f"description: x\nfoo: {literal}\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "fdl.yml:2:6: integer with" in result.output
    assert "quote the value" in result.output
    # The help still works (it lists the commands it could not read).
    helped = run_fdl(["--help"], cwd=project)
    assert helped.exit_code == 0, helped.output
    assert "fdl.yml:2:6" in helped.output


def test_long_integer_within_the_limit_still_reads(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_text(f"description: x\nfoo: {'1' * 4300}\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert "integer with" not in result.output


def test_set_key_with_a_thousand_segments_is_a_usage_error(run_fdl, project: Path) -> None:
    key = ".".join(["a"] * 1000)
    result = run_fdl(["--set", f"{key}=1", "config", "show"], cwd=project)
    assert result.exit_code == 2, result.output
    assert "key with 1000 segments; fdl accepts at most 50" in result.output


def test_env_key_with_a_thousand_segments_is_a_manifest_error(run_fdl, project: Path) -> None:
    name = "FDL__" + "__".join(["A"] * 1000)
    result = run_fdl(["config", "show"], cwd=project, env={name: "1"})
    assert result.exit_code == 3, result.output
    assert "key with 1000 segments" in result.output
    assert "environment variable FDL__A__A" in result.output


def test_set_value_with_a_non_utf8_byte_names_the_option(run_fdl, project: Path) -> None:
    value = os.fsdecode(b"a\xff")
    result = run_fdl(["--set", f"description={value}", "config", "show"], cwd=project)
    assert result.exit_code == 2, result.output
    assert "--set description: byte b'\\xff'" in result.output


def test_env_value_with_a_non_utf8_byte_names_the_variable(run_fdl, project: Path) -> None:
    result = run_fdl(
        ["config", "show"], cwd=project, env={"FDL__DESCRIPTION": os.fsdecode(b"a\xff")}
    )
    assert result.exit_code == 3, result.output
    assert "environment variable FDL__DESCRIPTION: byte b'\\xff'" in result.output


def test_alias_bomb_is_refused_at_the_alias_quickly(run_fdl, project: Path) -> None:
    lines = ["description: x", "a0: &a0 [1,1,1,1,1,1,1,1,1,1]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    (project / "fdl.yml").write_text("\n".join(lines) + "\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "fdl.yml:6:" in result.output
    assert "aliases expand to more than 100,000 values" in result.output


def test_ordinary_aliases_still_expand(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_text("description: x\nbase: &b {x: 1}\nother: *b\nlist: [*b, *b]\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert "aliases expand" not in result.output
