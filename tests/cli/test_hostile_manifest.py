"""Hostile manifests and overrides end in a documented exit code (issue 11)."""

from __future__ import annotations

import json
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
    (project / "fdl.yml").write_text(
        f"description: x\nimages:\n  train:\n    env:\n      N: {'1' * 4300}\n"
    )
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 0, result.output
    assert f"N: {'1' * 4300}  # fdl.yml:5" in result.output
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
    (project / "fdl.yml").write_text(
        "description: x\n"
        "images:\n"
        "  train:\n"
        "    env: &e {A: '1', B: two}\n"
        "  dev: &d\n"
        "    env: *e\n"
        "  builder: *d\n"
        "deploy:\n"
        "  lab:\n"
        "    kind: slurm\n"
        "    gpus: [&g {type: h100, product: NVIDIA-H100, capability: '9.0'}, *g]\n"
    )
    result = run_fdl(["config", "show", "--json"], cwd=project)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    env = {"A": "1", "B": "two"}
    assert [shown["images"][k]["env"] for k in ("train", "dev", "builder")] == [env] * 3
    gpu = {"type": "h100", "product": "NVIDIA-H100", "capability": "9.0"}
    assert shown["deploy"]["lab"]["gpus"] == [gpu, gpu]
    assert "aliases expand" not in result.output


LONG = "x" * 300  # one name over the usual 255-byte limit


@pytest.mark.parametrize(
    ("args", "env", "code", "needle"),
    [
        (["-f", LONG + ".yml"], {}, 3, "file name too long"),
        (["--env", LONG], {}, 2, "invalid environment name"),
        ([], {"FDL_ENV": LONG}, 2, "invalid environment name"),
    ],
)
def test_file_names_over_the_system_limit(
    run_fdl, project: Path, args: list[str], env: dict[str, str], code: int, needle: str
) -> None:
    result = run_fdl([*args, "config", "show"], cwd=project, env=env)
    assert result.exit_code == code, result.output
    assert needle in result.output
    assert "fix:" in result.output


def test_inherit_from_a_name_over_the_limit_is_located(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_text(f"description: x\ninherit-from: {LONG}.yml\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "fdl.yml:2:15: inherit-from target" in result.output
    assert "file name too long" in result.output


def test_inherit_from_cycle_names_each_link(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_text("description: x\ninherit-from: b.yml\n")
    (project / "b.yml").write_text("inherit-from: fdl.yml\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "b.yml:1:15: inherit-from cycle: fdl.yml -> b.yml -> fdl.yml" in result.output
    assert "fdl.yml:2:15: inherit-from" in result.output


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"description: x\nfoo: a\xffb\n", "fdl.yml:2:7: not valid UTF-8: byte b'\\xff'"),
        (b"description: x\nfoo: \xc3\xa9\xff\n", "fdl.yml:2:7: not valid UTF-8"),
        (b"description: x\nfoo: a\x00b\n", "fdl.yml:2:7: character U+0000 is not allowed"),
        (b"description: x\n  \x1b: 1\n", "fdl.yml:2:3: character U+001B is not allowed"),
    ],
)
def test_bad_bytes_are_located_by_line_and_column(
    run_fdl, project: Path, data: bytes, needle: str
) -> None:
    (project / "fdl.yml").write_bytes(data)
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert needle in result.output


def test_a_utf8_bom_is_accepted(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_bytes(b"\xef\xbb\xbfdescription: x\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("target", ["/dev/zero", "/tmp", "fifo"])
def test_inherit_from_a_special_file_is_refused_without_reading(
    run_fdl, project: Path, target: str
) -> None:
    if target == "fifo":
        os.mkfifo(project / "fifo")
    (project / "fdl.yml").write_text(f"description: x\ninherit-from: {target}\n")
    result = run_fdl(["config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "fdl.yml:2:15:" in result.output


def test_manifest_that_is_a_fifo_is_refused_without_hanging(run_fdl, project: Path) -> None:
    os.mkfifo(project / "pipe.yml")
    result = run_fdl(["-f", "pipe.yml", "config", "show"], cwd=project)
    assert result.exit_code == 3, result.output
    assert "not a regular file" in result.output


def test_oversized_manifest_is_refused(tmp_path: Path) -> None:
    from fdl.errors import ManifestError
    from fdl.manifest._layers import MAX_MANIFEST_BYTES, read_text

    big = tmp_path / "fdl.yml"
    big.write_bytes(b"#" * (MAX_MANIFEST_BYTES + 1))
    with pytest.raises(ManifestError, match="fdl reads manifests of at most"):
        read_text(big, "fdl.yml")


def test_working_directory_refuses_long_and_missing_names(tmp_path: Path) -> None:
    from fdl.errors import UsageError
    from fdl.manifest._layers import working_directory

    assert working_directory(tmp_path, ".") == tmp_path.resolve()
    with pytest.raises(UsageError, match="file name too long"):
        working_directory(tmp_path, LONG)
    with pytest.raises(UsageError, match="not a directory"):
        working_directory(tmp_path, "missing")


def test_json_manifest_integer_over_the_limit_is_located(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.json").write_text('{"description": "x", "n": ' + "1" * 5000 + "}")
    result = run_fdl(["config", "show"], cwd=tmp_path)
    assert result.exit_code == 3, result.output
    assert "fdl.json:1:27: integer with 5000 characters" in result.output


def test_compose_variable_with_an_unbalanced_quote_exits_4(run_fdl, tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text("commands:\n  t: {run: echo, docker: dev}\n")
    (tmp_path / "compose.yaml").write_text("services:\n  dev: {image: x}\n")
    result = run_fdl(
        ["t"], cwd=tmp_path, env={"FDL_COMPOSE": "podman 'compose", "FDL_IN_CONTAINER": "0"}
    )
    assert result.exit_code == 4, result.output
    assert "FDL_COMPOSE=" in result.output
