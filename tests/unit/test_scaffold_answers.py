"""`fdl init` answers: names, defaults, the answers a project recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fdl.errors import ManifestError, UsageError
from fdl.scaffold import (
    DEFAULTS,
    answers_path,
    make_answers,
    read_answers,
    suggest_name,
    validate_name,
)


@pytest.mark.parametrize("name", ["my-model", "m1", "resnet_50", "a", "x-1-y_2"])
def test_good_names(name: str) -> None:
    assert validate_name(name, "cpp") == name
    assert validate_name(name, "flodl") == name


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("My Model", "my-model"),
        ("1model", "model"),
        ("model-", "model"),
        ("a--b", "a-b"),
        ("über", "ber"),
        ("", "my-model"),
        ("x" * 65, "x" * 64),
    ],
)
def test_bad_names_say_what_is_wrong_and_suggest_one(name: str, suggestion: str) -> None:
    with pytest.raises(UsageError) as caught:
        validate_name(name, "cpp")
    assert f"invalid project name {name!r}" in caught.value.message
    assert "lowercase letters" in caught.value.message
    assert caught.value.hint == f"e.g. {suggestion!r}"
    assert suggest_name(name) == suggestion


@pytest.mark.parametrize(
    ("name", "template"), [("fn", "flodl"), ("flodl", "flodl"), ("std", "flodl"), ("train", "cpp")]
)
def test_names_a_template_reserves(name: str, template: str) -> None:
    with pytest.raises(UsageError, match=f"the {template} template reserves it"):
        validate_name(name, template)


def test_given_answers_win_over_recorded_ones_which_win_over_defaults() -> None:
    recorded = {"template": "cpp", "mode": "native", "torch": "2.13.0"}
    assert make_answers("m", {}, recorded).to_json() == {
        "name": "m",
        "template": "cpp",
        "mode": "native",
        "torch": "2.13.0",
        "example": False,
    }
    given = {"mode": "baked", "torch": None, "template": None}
    assert make_answers("m", given, recorded).mode == "baked"
    fresh = make_answers("m", {}, {})
    assert (fresh.template, fresh.mode) == (DEFAULTS["template"], DEFAULTS["mode"])


def test_torch_versions_are_completed_from_fdls_tables() -> None:
    cpp = {"template": "cpp"}
    assert make_answers("m", {**cpp, "torch": "2.13"}, {}).torch == "2.13.0"
    assert make_answers("m", {**cpp, "torch": "2.14.1"}, {}).torch == "2.14.1"
    with pytest.raises(UsageError, match="invalid torch version 'latest'"):
        make_answers("m", {**cpp, "torch": "latest"}, {})


def test_the_flodl_template_pins_the_torch_of_its_flodl_release() -> None:
    """floDl 0.8.0 (the release the template writes) compiles against libtorch 2.10.0 only;
    a C++ project stays free (the newest release)."""
    from fdl.compat import default_torch_version

    assert make_answers("m", {}, {}).torch == "2.10.0"
    assert make_answers("m", {"torch": "2.10"}, {}).torch == "2.10.0"
    assert make_answers("m", {"template": "cpp"}, {}).torch == default_torch_version()
    # an answer an older fdl recorded (it wrote the newest release) gives way
    assert make_answers("m", {}, {"torch": "2.15.0"}).torch == "2.10.0"
    with pytest.raises(UsageError) as caught:
        make_answers("m", {"torch": "2.15.0"}, {})
    assert "floDl 0.8.0, which compiles against torch 2.10.0 only" in caught.value.message
    assert 'libtorch.torch: "2.10.0"' in (caught.value.hint or "")


@pytest.mark.parametrize(("key", "value"), [("template", "rust"), ("mode", "docker")])
def test_unknown_template_or_mode(key: str, value: str) -> None:
    with pytest.raises(UsageError, match=f"unknown {key} {value!r}") as caught:
        make_answers("m", {key: value}, {})
    assert caught.value.hint is not None and "choose one of" in caught.value.hint


def test_recorded_answers_are_read_back(tmp_path: Path) -> None:
    assert read_answers(tmp_path) is None
    answers_path(tmp_path).write_text(
        "template: cpp\ntemplate_version: 1\nfdl_version: '1'\n"
        "answers: {name: m, mode: baked, torch: '2.13.0', example: true}\n"
    )
    recorded = read_answers(tmp_path)
    assert recorded == {
        "template": "cpp",
        "name": "m",
        "mode": "baked",
        "torch": "2.13.0",
        "example": True,
    }
    assert make_answers("m", {}, recorded).example is True


@pytest.mark.parametrize("text", ["[1, 2]\n", "answers: 3\n", "a: [\n"])
def test_a_broken_answers_file_is_a_located_error(tmp_path: Path, text: str) -> None:
    answers_path(tmp_path).write_text(text)
    with pytest.raises(ManifestError) as caught:
        read_answers(tmp_path)
    assert str(answers_path(tmp_path)) in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize(
    ("content", "where", "fix"),
    [
        (b"\xff\xfe", "not UTF-8", "delete it"),
        (b"answers: {torch: 2.10}", "answers.torch: expected text, got 2.1", 'torch: "2.13.0"'),
        (b"template: [1]\nanswers: {}", "template: expected text, got [1]", "template: cpp"),
        (b"answers: {gpus: [6.1]}", "answers.gpus: expected text", 'gpus: "6.1,12.0"'),
        (b"answers: {mode: {a: 1}}", "answers.mode: expected text", 'mode: "native"'),
        (b"answers: {example: 'no'}", "answers.example: expected true or false", "example: false"),
    ],
)
def test_an_answer_of_another_type_is_refused_at_its_key(
    tmp_path: Path, content: bytes, where: str, fix: str
) -> None:
    """Each was an internal error, a wrong release (2.10 read as 2.1) or a silent `true`."""
    answers_path(tmp_path).write_bytes(content)
    with pytest.raises(ManifestError) as caught:
        read_answers(tmp_path)
    assert where in caught.value.message
    assert fix in (caught.value.hint or "")


def test_answers_file_round_trip_through_the_planner() -> None:
    from fdl.scaffold import plan_project

    answers = make_answers("m", {"template": "cpp", "mode": "native", "torch": "2.13.0"}, {})
    text = next(f.content for f in plan_project(answers) if f.path == ".fdl-answers.yml")
    data = yaml.safe_load(text)
    assert data["template"] == "cpp" and data["template_version"] == 1
    assert {"template": data["template"], **data["answers"]} == answers.to_json()
