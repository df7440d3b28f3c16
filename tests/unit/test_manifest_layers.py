"""Discovery, overlays, inherit-from, environment variables and --set."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import ManifestError, UsageError
from fdl.manifest import LayerKind, load_manifest
from fdl.manifest._layers import discover, list_environments


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_discovery_walks_up(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "description: x\n"})
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert discover(deep).path == tmp_path / "fdl.yml"


def test_two_candidates_in_one_directory_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "a: 1\n", "fdl.json": "{}"})
    with pytest.raises(ManifestError) as info:
        discover(tmp_path)
    assert info.value.message == (
        f"{tmp_path}: found both fdl.yml and fdl.json; fdl will not pick one silently"
    )


def test_two_examples_or_two_overlays_are_refused_with_both_names(tmp_path: Path) -> None:
    from fdl.manifest._layers import find_overlay

    write(tmp_path, {"fdl.yml.example": "a: 1\n", "fdl.yaml.dist": "a: 2\n"})
    with pytest.raises(ManifestError) as info:
        discover(tmp_path)
    assert info.value.message == (
        f"{tmp_path}: found both fdl.yml.example and fdl.yaml.dist and no fdl.yml"
    )
    write(tmp_path, {"fdl.yml": "a: 1\n", "fdl.ci.yml": "a: 2\n", "fdl.ci.json": "{}"})
    with pytest.raises(ManifestError) as info:
        find_overlay(tmp_path, "ci", required=True)
    assert info.value.message == (
        f"{tmp_path}: found both fdl.ci.yml and fdl.ci.json for environment 'ci'"
    )
    assert info.value.hint == "keep one of them"


def test_explicit_manifest(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "a: 1\n", "fdl.json": "{}", "other.yml": "description: o\n"})
    found = discover(tmp_path, Path("other.yml"))
    assert found.path.name == "other.yml"
    with pytest.raises(ManifestError):
        discover(tmp_path, Path("missing.yml"))


def test_example_file_is_found_when_alone(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml.example": "description: ex\n"})
    found = discover(tmp_path)
    assert found.example and found.path.name == "fdl.yml.example"


def test_nothing_found(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        discover(tmp_path)
    assert "no fdl.yml" in info.value.message
    assert info.value.hint and "fdl init" in info.value.hint


def test_list_environments(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "fdl.yml": "",
            "fdl.ci.yml": "",
            "fdl.prod.json": "{}",
            "fdl.yml.example": "",
            "fdl.x.txt": "",
        },
    )
    assert list_environments(tmp_path) == ["ci", "prod"]


def test_missing_overlay_lists_existing_environments(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "description: x\n", "fdl.ci.yml": "", "fdl.prod.yaml": ""})
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, env="stage", environ={})
    assert "stage" in info.value.message
    assert info.value.hint is not None and "ci, prod" in info.value.hint


def test_overlay_formats(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "description: base\n", "fdl.ci.json": '{"description": "ci"}'})
    manifest = load_manifest(tmp_path, env="ci", environ={})
    assert manifest.get("description") == "ci"
    origin = manifest.origin("description")
    assert (
        origin is not None and origin.source == "fdl.ci.json" and origin.layer is LayerKind.OVERLAY
    )


def test_inherit_from_chain_and_precedence(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "shared/a.yml": "description: a\ncommands:\n  x: {run: a}\n  y: {run: a}\n  z: {run: a}\n",
            "fdl.yml": "inherit-from: shared/a.yml\ncommands:\n  y: {run: base}\n  z: {run: base}\n",
            "ci/common.yml": "commands:\n  z: {run: inherited-by-overlay}\n  w: {run: o}\n",
            "fdl.ci.yml": "inherit-from: ci/common.yml\ndescription: ci\n",
        },
    )
    manifest = load_manifest(tmp_path, env="ci", environ={})
    assert manifest.get("commands.x.run") == "a"
    assert manifest.get("commands.y.run") == "base"
    assert manifest.get("commands.z.run") == "inherited-by-overlay"
    assert manifest.get("description") == "ci"
    kinds = [(layer.source, layer.kind) for layer in manifest.layers]
    assert kinds == [
        ("shared/a.yml", LayerKind.INHERITED),
        ("fdl.yml", LayerKind.BASE),
        ("ci/common.yml", LayerKind.INHERITED),
        ("fdl.ci.yml", LayerKind.OVERLAY),
    ]


def test_inherit_from_cycle(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "inherit-from: a.yml\n", "a.yml": "inherit-from: fdl.yml\n"})
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, environ={})
    assert "cycle" in info.value.message
    assert "fdl.yml -> a.yml -> fdl.yml" in info.value.message


def test_inherit_from_missing_target_is_located(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "description: x\ninherit-from: nope.yml\n"})
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, environ={})
    assert info.value.location is not None and info.value.location.line == 2


def test_inherit_from_must_be_a_path(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "inherit-from: [a]\n"})
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, environ={})
    assert "non-empty file path" in info.value.message


def test_overlay_inheriting_the_base_is_not_applied_twice(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "description: base\n", "fdl.ci.yml": "inherit-from: fdl.yml\n"})
    manifest = load_manifest(tmp_path, env="ci", environ={})
    assert [layer.source for layer in manifest.layers] == ["fdl.yml", "fdl.ci.yml"]


def test_env_var_layer(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"fdl.yml": "commands:\n  cuda-test:\n    run: a\n    description: d\n"},
    )
    environ = {
        "FDL__COMMANDS__CUDA_TEST__RUN": "b",
        "FDL__DESCRIPTION": "'quoted: yes'",
        "FDL_ENV": "ignored-here",
        "OTHER": "x",
    }
    manifest = load_manifest(tmp_path, environ=environ)
    assert manifest.get("commands.cuda-test.run") == "b"
    assert manifest.get("description") == "quoted: yes"
    origin = manifest.origin("commands.cuda-test.run")
    assert origin is not None and origin.source == "$FDL__COMMANDS__CUDA_TEST__RUN"
    assert origin.layer is LayerKind.ENV


def test_env_var_values_are_yaml(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "commands: {}\n"})
    manifest = load_manifest(
        tmp_path,
        environ={"FDL__COMMANDS__X__DESCRIPTION": "12", "FDL__COMMANDS__X__RUN": "true"},
        schema=None,
    )
    assert manifest.get("commands.x.description") == 12
    assert manifest.get("commands.x.run") is True


def test_set_layer_beats_env(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "description: base\n"})
    manifest = load_manifest(
        tmp_path,
        environ={"FDL__DESCRIPTION": "env"},
        sets=["description=set", "commands.t.run=echo hi"],
    )
    assert manifest.get("description") == "set"
    assert manifest.get("commands.t.run") == "echo hi"
    assert manifest.layers[-1].kind is LayerKind.SET


@pytest.mark.parametrize("bad", ["novalue", "=x", "a..b=1", ".a=1"])
def test_bad_set_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    write(tmp_path, {"fdl.yml": "description: base\n"})
    with pytest.raises(UsageError):
        load_manifest(tmp_path, environ={}, sets=[bad])


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "- a\n- b\n"})
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, environ={})
    assert "mapping" in info.value.message
    assert info.value.location is not None and info.value.location.line == 1


def test_empty_overlay_file_changes_nothing(tmp_path: Path) -> None:
    write(
        tmp_path, {"fdl.yml": "description: base\ncommands:\n  t: {run: x}\n", "fdl.empty.yml": ""}
    )
    assert (
        load_manifest(tmp_path, env="empty", environ={}).data
        == load_manifest(tmp_path, environ={}).data
    )


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_bytes(b"description: \xff\xfe\n")
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path, environ={})
    assert "UTF-8" in info.value.message


def test_explain_unknown_key_suggests(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "commands:\n  test: {run: x}\n"})
    manifest = load_manifest(tmp_path, environ={})
    with pytest.raises(ManifestError) as info:
        manifest.explain("commands.tset.run")
    assert info.value.hint == "did you mean 'commands.test.run'?"


def test_explain_append_and_replace(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "fdl.yml": "description: x\nextra:\n  t:\n    options: {tags: [a, b], x: {k: 1}}\n",
            "fdl.ci.yml": "extra:\n  t:\n    options:\n      tags: !append [c]\n      x: !replace {j: 2}\n",
        },
    )
    manifest = load_manifest(tmp_path, env="ci", environ={}, schema=None)
    assert manifest.get("extra.t.options") == {"tags": ["a", "b", "c"], "x": {"j": 2}}
    [tags] = manifest.explain("extra.t.options.tags")
    assert [c.action for c in tags.live] == ["append", "set"]
    assert [c.origin.source for c in tags.live] == ["fdl.ci.yml", "fdl.yml"]
    explained = {e.path: e for e in manifest.explain("extra.t.options.x")}
    removed = explained[("extra", "t", "options", "x", "k")]
    assert not removed.present
    assert removed.removed_by is not None and removed.removed_by.action == "removed-by-replace"
