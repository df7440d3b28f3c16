"""Hostile results files for `fdl bench report` and `fdl bench compare`: every field of a
header and of a round replaced by a value of each wrong type (null, a list, a number, a
string, an object, deep nesting, NaN), run in process. Each case ends in exit 0 (the
value is allowed) or 2 (the file is refused with its line), never a traceback (70)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

HEADER: dict[str, Any] = {
    "type": "run",
    "format": 2,
    "run": "aaaa",
    "started": "2026-11-25T01:00:00Z",
    "environment": {"fdl": "0.1.0"},
    "benchmarks": [
        {
            "name": "epoch",
            "sides": [{"name": "a", "argv": ["x"]}, {"name": "b", "argv": ["y"]}],
            "metric": "wall_s",
            "threshold": {"percent": 5.0, "mads": 3.0},
            "rounds": 3,
            "units": {"wall_s": "s"},
        }
    ],
}


def _round(side: str, number: int, value: float) -> dict[str, Any]:
    return {
        "type": "round",
        "run": "aaaa",
        "benchmark": "epoch",
        "side": side,
        "round": number,
        "position": 0,
        "wall_s": value,
        "cpu_s": value / 2,
        "figures": {"ms": value * 1000},
    }


ROUNDS = [_round(s, n, 1.0 + n / 100 + (s == "b") * 0.2) for n in (1, 2, 3) for s in "ab"]
DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE: list[Any] = [None, [], ["x"], 1, -1.5, "x", {}, {"a": {"b": []}}, True, "DEEP", "NaN"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _set(record: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(record)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _dump(record: Any) -> str:
    text = json.dumps(record)
    return text.replace('"DEEP"', DEEP).replace('"NaN"', "NaN")


def _cases() -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = []
    rounds = "\n".join(json.dumps(r) for r in ROUNDS)
    for path in _paths(HEADER):
        if path == ("type",):
            continue
        for value in HOSTILE:
            text = _dump(_set(HEADER, path, value)) + "\n" + rounds + "\n"
            cases.append((f"header.{'.'.join(map(str, path))}={value!r:.8}", text))
    for path in _paths(ROUNDS[0]):
        if path == ("type",):
            continue
        for value in HOSTILE:
            bad = _dump(_set(ROUNDS[0], path, value))
            text = "\n".join([json.dumps(HEADER), bad, *map(json.dumps, ROUNDS[1:])]) + "\n"
            cases.append((f"round.{'.'.join(map(str, path))}={value!r:.8}", text))
    cases.append(("deep line", DEEP + "\n" + json.dumps(HEADER) + "\n"))
    return cases


CASES = _cases()
# -m "not slow" runs every 8th case; the slow mark runs them all.
PARAMS = [
    pytest.param(*case, id=case[0], marks=() if i % 8 == 0 else pytest.mark.slow)
    for i, case in enumerate(CASES)
]


def test_the_fuzzer_covers_every_field_with_each_wrong_type() -> None:
    assert len(CASES) > 300


@pytest.mark.parametrize(("name", "text"), PARAMS)
def test_a_hostile_results_file_ends_in_a_documented_exit(
    name: str, text: str, tmp_path: Path, run_fdl: Any
) -> None:
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(text)
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(map(json.dumps, [HEADER, *ROUNDS])) + "\n")
    for args in (
        ["bench", "report", str(hostile)],
        ["bench", "report", str(hostile), "--json"],
        ["bench", "compare", str(good), str(hostile)],
        ["bench", "compare", str(hostile), str(good)],
    ):
        result = run_fdl(args, cwd=tmp_path)
        assert result.exit_code in {0, 1, 2}, (name, args, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
        if result.exit_code == 2:
            assert "hostile.jsonl" in result.stderr, result.stderr


def test_a_wrong_type_is_named_with_its_line(tmp_path: Path, run_fdl: Any) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(
        _dump(_set(HEADER, ("benchmarks", 0, "sides"), None)).replace('"sides": null', '"sides": 7')
        + "\n"
    )
    result = run_fdl(["bench", "report", str(path)], cwd=tmp_path)
    assert result.exit_code == 2
    assert "r.jsonl:1: benchmarks[0].sides must be a list, not int" in result.stderr


def test_compare_calls_a_nan_median_not_ok(tmp_path: Path, run_fdl: Any) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(map(json.dumps, [HEADER, *ROUNDS])) + "\n")
    nan = tmp_path / "nan.jsonl"
    nan.write_text(
        "\n".join(
            [json.dumps(HEADER), *(json.dumps({**r, "wall_s": "NaN"}) for r in ROUNDS)]
        ).replace('"NaN"', "NaN")
        + "\n"
    )
    result = run_fdl(["bench", "compare", str(good), str(nan)], cwd=tmp_path)
    assert result.exit_code == 1, result.stdout
    assert "NOT A NUMBER" in result.stdout
    verdicts = json.loads(
        run_fdl(["bench", "compare", str(good), str(nan), "--json"], cwd=tmp_path).stdout
    )["verdicts"]
    assert all(v["slower"] for v in verdicts)
