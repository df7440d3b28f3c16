"""Completion candidates computed from the manifest at completion time."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.cli._complete import _merge_equals, complete_words
from tests.support.tasks_helpers import write


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        {
            "fdl.yml": """\
            commands:
              greet: {run: echo hello, description: Say hello}
              config: {run: echo shadowed}
              train:
            """,
            "fdl.ci.yml": "description: ci\n",
            "train/fdl.yml": """\
            entry: python train.py
            arg-name: recipe
            schema:
              options:
                model: {type: string, choices: [mlp, lenet], short: m, description: Model}
                data: {type: path}
                tags: {type: string, completer: "printf 'a\\\\nb\\\\n'"}
              args: [{name: split, choices: [train, test], required: false}]
            commands:
              quick: {description: Fast, options: {model: lenet}}
              eval: {run: echo eval}
            """,
            "train/fdl.ci.yml": """\
            commands:
              cionly: {options: {model: mlp}}
            """,
        },
    )


def values(root: Path, *words: str, env: dict[str, str] | None = None) -> list[str]:
    result = complete_words(list(words), root, env or {})
    if result.directive:
        return [result.directive]
    current = words[-1] if words else ""
    return [v for v, _ in result.candidates if v.startswith(current)]


def test_top_level_lists_builtins_and_project_commands(root: Path) -> None:
    found = values(root, "")
    assert {"config", "run", "completions", "greet", "train"} <= set(found)
    assert found.count("config") == 1
    assert values(root, "gr") == ["greet"]


def test_global_options_and_environments(root: Path) -> None:
    assert "--env" in values(root, "--")
    assert values(root, "--env", "") == ["ci"]
    assert values(root, "@") == ["@ci"]
    assert values(root, "-C", "") == [":dirs"]
    assert values(root, "-f", "") == [":files"]


def test_nested_commands_presets_and_options(root: Path) -> None:
    assert values(root, "train", "") == ["quick", "eval", "train", "test"]
    assert set(values(root, "train", "--")) >= {"--model", "--data", "--dry-run", "--help", "--"}
    assert values(root, "train", "--model", "") == ["mlp", "lenet"]
    assert values(root, "train", "-m", "l") == ["lenet"]
    assert values(root, "train", "quick", "--model=") == ["--model=mlp", "--model=lenet"]
    assert values(root, "train", "--data", "") == [":files"]
    assert values(root, "train", "--tags", "") == ["a", "b"]


def test_environment_selects_nested_overlays(root: Path) -> None:
    assert "cionly" not in values(root, "train", "")
    assert "cionly" in values(root, "--env", "ci", "train", "")
    assert "cionly" in values(root, "train", "", env={"FDL_ENV": "ci"})


def test_run_commands_offer_fdl_flags_then_files_after_separator(root: Path) -> None:
    assert values(root, "greet", "") == ["--", "--dry-run", "--help", "--no-append"]
    assert values(root, "greet", "--", "") == [":files"]


def test_builtins_are_completed_from_their_definitions(root: Path) -> None:
    assert values(root, "completions", "") == ["bash", "zsh", "fish"]
    assert "show" in values(root, "config", "")
    assert "--json" in values(root, "config", "show", "--")
    assert values(root, "config", "show", "--env", "") == ["ci"]
    assert values(root, "run", "") == ["greet", "config", "train"]
    assert values(root, "run", "train", "q") == ["quick"]


def test_a_broken_manifest_still_completes_builtins(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "commands: [\n"})
    assert "config" in values(tmp_path, "")


def test_bash_splits_equals_into_words() -> None:
    assert _merge_equals(["train", "--model", "=", "le"]) == ["train", "--model=le"]
    assert _merge_equals(["--model", "="]) == ["--model="]
