"""Validation against the manifest schema, and its JSON Schema export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.errors import ManifestError, ManifestErrors
from fdl.manifest import load_manifest
from fdl.manifest.sections import root_spec

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "manifest-project"


def load_text(tmp_path: Path, text: str):
    (tmp_path / "fdl.yml").write_text(text)
    return load_manifest(tmp_path, environ={})


def errors_of(tmp_path: Path, text: str) -> list[ManifestError]:
    with pytest.raises(ManifestError) as info:
        load_text(tmp_path, text)
    error = info.value
    return error.errors if isinstance(error, ManifestErrors) else [error]


def test_unknown_key_with_did_you_mean(tmp_path: Path) -> None:
    [error] = errors_of(tmp_path, "commands:\n  test:\n    run: x\n    dokcer: dev\n")
    assert "unknown key 'dokcer'" in error.message
    assert error.hint == "did you mean 'docker'?"
    assert error.location is not None
    assert (error.location.line, error.location.column) == (4, 5)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    [error] = errors_of(tmp_path, "descripton: x\n")
    assert error.hint == "did you mean 'description'?"


def test_wrong_type_names_the_expected_type(tmp_path: Path) -> None:
    [error] = errors_of(tmp_path, "commands:\n  test:\n    run: 5\n")
    assert "commands.test.run: expected a string, got an integer (5)" in error.message
    assert error.location is not None and (error.location.line, error.location.column) == (3, 10)


def test_all_problems_are_reported(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, "commands:\n  a: {run: [x]}\n  b: {run: y, bogus: 1}\n  c: 7\n")
    assert len(errors) == 3
    assert sorted(e.location.line for e in errors if e.location) == [2, 3, 4]


def test_kind_errors_at_load_time(tmp_path: Path) -> None:
    errors = errors_of(
        tmp_path,
        "commands:\n"
        "  a: {docker: dev}\n"
        "  b: {append: x}\n"
        "  c: {run: x, path: sub}\n"
        "  d: {options: {epochs: 1}}\n",
    )
    messages = " | ".join(e.message for e in errors)
    assert "`docker:` but no `run:`" in messages
    assert "`append:` but no `run:`" in messages
    assert "both `run:` and `path:`" in messages
    assert "preset" in messages


def test_error_in_overlay_points_at_the_overlay(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text("commands:\n  t: {run: x}\n")
    (tmp_path / "fdl.ci.yml").write_text("commands:\n  t:\n    run: [oops]\n")
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, env="ci", environ={})
    assert info.value.location is not None and info.value.location.file == "fdl.ci.yml"


def test_invalid_command_name(tmp_path: Path) -> None:
    [error] = errors_of(tmp_path, "commands:\n  'bad name': {run: x}\n")
    assert "not a valid name" in error.message


def test_reference_kind_manifest_loads() -> None:
    manifest = load_manifest(FIXTURE, environ={})
    assert manifest.get("commands.test.append") == "-- --nocapture"
    assert manifest.get("commands.train", "absent") == "absent"
    assert "train" in manifest.data["commands"]


def test_json_schema_accepts_the_fixture_and_rejects_typos() -> None:
    import jsonschema
    import yaml

    schema = root_spec().json_schema()
    schema["properties"]["inherit-from"] = {"type": "string"}
    for name in ("fdl.yml", "fdl.ci.yml", "fdl.gpu.yml"):
        data = yaml.safe_load((FIXTURE / name).read_text())
        jsonschema.validate(data, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"commands": {"t": {"dokcer": "x"}}}, schema)
    json.dumps(schema)
