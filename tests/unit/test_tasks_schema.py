"""User arguments checked against a nested manifest's schema before the entry starts."""

from __future__ import annotations

import pytest

from fdl.errors import UsageError
from fdl.tasks._args import CommandSchema, check_args

SCHEMA = CommandSchema.from_data(
    {
        "options": {
            "model": {"type": "string", "choices": ["mlp", "lenet", "resnet"], "short": "m"},
            "rounds": {"type": "int"},
            "lr": {"type": "float"},
            "validate": {"type": "bool", "short": "v"},
            "quiet": {"type": "bool", "short": "q"},
            "tags": {"type": "list[string]"},
            "sizes": {"type": "list[int]", "choices": [1, 2, 4]},
            "data": {"type": "path", "env": "DATA_DIR"},
            "batch-size": {"type": "int", "env": "BATCH"},
        },
        "args": [
            {"name": "run-id", "required": False},
        ],
    }
)
STRICT = CommandSchema.from_data({**{"strict": True}, "options": {"rounds": {"type": "int"}}})


def check(tokens: list[str], schema: CommandSchema = SCHEMA, environ: dict[str, str] | None = None):
    return check_args(schema, tokens, command="train", environ=environ or {})


@pytest.mark.parametrize(
    "tokens",
    [
        [],
        ["--model", "lenet"],
        ["--model=resnet", "-m", "mlp"],
        ["-mlenet"],
        ["-m=lenet"],
        ["--rounds", "3", "--lr", "-0.1"],
        ["--lr=-1e-3"],
        ["--lr", "-.5"],
        ["-vq"],
        ["-vqm", "mlp"],
        ["--tags", "a,b", "--tags", "c"],
        ["--sizes", "1,4"],
        ["latest"],
        ["-"],
        ["--data", "./x"],
    ],
)
def test_valid_arguments_pass_unchanged(tokens: list[str]) -> None:
    assert check(tokens).words == tokens


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (["--model", "vgg"], "invalid value 'vgg' for --model; allowed: mlp, lenet, resnet"),
        (["-m", "vgg"], "invalid value 'vgg' for -m; allowed: mlp, lenet, resnet"),
        (["--rounds", "three"], "--rounds: 'three' is not an integer"),
        (["--rounds", "1.5"], "--rounds: '1.5' is not an integer"),
        (["--lr", "fast"], "--lr: 'fast' is not a number"),
        (["--rounds"], "--rounds needs a value (int)"),
        (["--rounds", "--lr", "1"], "--rounds needs a value (int)"),
        (["--validate=yes"], "--validate is a switch and takes no value"),
        (["--sizes", "1,3"], "invalid value '3' for --sizes; allowed: 1, 2, 4"),
    ],
)
def test_invalid_arguments_are_rejected_before_starting(tokens: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        check(tokens)
    assert message in caught.value.message
    assert caught.value.hint == "see `fdl train --help`"


def test_strict_schema_rejects_unknown_options_with_did_you_mean() -> None:
    with pytest.raises(UsageError) as caught:
        check(["--rund", "5"], STRICT)
    assert caught.value.message == "unknown option --rund for `train`; did you mean --rounds?"


def test_strict_schema_rejects_unknown_short_options() -> None:
    with pytest.raises(UsageError, match="unknown option -z for `train`"):
        check(["-z"], STRICT)


def test_lenient_schema_passes_unknown_options_with_a_note_for_near_misses() -> None:
    checked = check(["--modle", "x", "--whatever", "latest"])
    assert checked.words == ["--modle", "x", "--whatever", "latest"]
    assert checked.notes == [
        "--modle is not declared by `train` (did you mean --model?); passing it on as typed"
    ]


def test_env_fallback_adds_options_not_given() -> None:
    checked = check([], environ={"DATA_DIR": "/data", "BATCH": "32"})
    assert checked.words == ["--data", "/data", "--batch-size", "32"]
    assert check(["--data", "/other"], environ={"DATA_DIR": "/data"}).words == ["--data", "/other"]


def test_env_fallback_values_are_checked() -> None:
    with pytest.raises(
        UsageError, match=r"--batch-size \(from \$BATCH\): 'many' is not an integer"
    ):
        check([], environ={"BATCH": "many"})


def test_env_fallback_skips_options_a_preset_sets() -> None:
    unset = check_args(SCHEMA, [], command="train", environ={"BATCH": "8"})
    assert unset.words == ["--batch-size", "8"]  # the fallback, where no preset sets it
    checked = check_args(
        SCHEMA, [], command="train", environ={"BATCH": "8"}, preset_options=["batch_size"]
    )
    assert checked.words == []


def test_positionals_required_variadic_choices() -> None:
    schema = CommandSchema.from_data(
        {
            "args": [
                {"name": "mode", "choices": ["a", "b"]},
                {"name": "count", "type": "int", "required": False},
                {"name": "rest", "variadic": True, "required": False},
            ],
            "strict": True,
        }
    )
    assert check(["a", "3", "x", "y"], schema).words == ["a", "3", "x", "y"]
    with pytest.raises(UsageError, match="missing argument <mode>"):
        check([], schema)
    with pytest.raises(UsageError, match="invalid value 'c' for <mode>; allowed: a, b"):
        check(["c"], schema)
    with pytest.raises(UsageError, match="<count>: 'x' is not an integer"):
        check(["a", "x"], schema)


def test_strict_schema_rejects_extra_positionals() -> None:
    schema = CommandSchema.from_data({"args": [{"name": "one"}], "strict": True})
    with pytest.raises(UsageError, match="unexpected argument 'two'"):
        check(["1", "two"], schema)


def test_no_schema_accepts_anything() -> None:
    assert check(["--x", "-y", "z"], CommandSchema()).words == ["--x", "-y", "z"]


def test_underscores_and_dashes_name_the_same_option() -> None:
    assert SCHEMA.find("batch_size") is SCHEMA.find("batch-size")
