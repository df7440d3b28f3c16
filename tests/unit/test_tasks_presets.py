"""Structured sections and preset options become flags for the entry."""

from __future__ import annotations

from fdl.tasks._presets import config_words, format_value, merge_settings, option_words


def test_reference_flag_order_and_formats() -> None:
    base = {
        "ddp": {
            "policy": "cadence",
            "anchor": "auto",
            "speed_hint": {"slow_rank": 1, "ratio": 0.5},
            "partition_ratios": [0.7, 0.3],
            "timeline": True,
        },
        "training": {"epochs": 5, "seed": 42},
        "output": {"dir": "runs/", "monitor": 3000, "timeline": True},
    }
    preset = {
        "training": {"epochs": 1, "batch_size": 32},
        "options": {"model": "lenet", "validate": True},
    }
    words = config_words(merge_settings(base, preset))
    assert " ".join(words) == (
        "--policy cadence --anchor auto --speed-hint 1:0.5 --partition-ratios 0.7,0.3 --timeline "
        "--epochs 1 --batch-size 32 --seed 42 --output runs/ --monitor 3000 --model lenet --validate"
    )


def test_preset_overrides_key_by_key_and_nulls_keep_the_base() -> None:
    merged = merge_settings(
        {"training": {"epochs": 5, "lr": 0.1}, "options": {"a": 1, "b": 2}},
        {"training": {"epochs": None, "lr": 0.01}, "options": {"b": 3}},
    )
    assert merged["training"] == {"epochs": 5, "lr": 0.01}
    assert merged["options"] == {"a": 1, "b": 3}


def test_batches_per_epoch_is_passed_as_batches() -> None:
    assert config_words({"training": {"batches_per_epoch": 10}}) == ["--batches", "10"]


def test_switches_and_nulls() -> None:
    assert config_words({"ddp": {"timeline": False}}) == []
    assert option_words({"on": True, "off": False, "none": None}) == ["--on"]


def test_options_in_key_order_with_dashes() -> None:
    words = option_words({"zeta": 1, "batch_size": 32, "name": "a b"})
    assert words == ["--batch-size", "32", "--name", "a b", "--zeta", "1"]


def test_list_options_comma_joined_when_the_schema_says_list_else_json() -> None:
    assert option_words({"tags": ["a", "b"]}, {"tags"}) == ["--tags", "a,b"]
    assert option_words({"tags": ["a", "b"]}) == ["--tags", '["a","b"]']
    assert option_words({"cfg": {"k": 1}}) == ["--cfg", '{"k":1}']


def test_value_formatting() -> None:
    assert format_value(1.0) == "1"
    assert format_value(0.001) == "0.001"
    assert format_value(3) == "3"
    assert format_value(True) == "true"
