"""The suite's order under pytest-xdist (heavy files first, a file's tests together) and
the list of what the tests downloaded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support import downloads, schedule
from tests.support.schedule import file_of, heaviest_first, read_durations

IDS = [
    "tests/unit/test_a.py::test_1",
    "tests/unit/test_a.py::test_2",
    "tests/cli/test_b.py::test_1[x]",
    "tests/cli/test_b.py::test_1[y]",
    "tests/integration/test_c.py::test_1",
    "tests/unit/test_new.py::test_1",
]


def _files(order: list[int]) -> list[str]:
    return [IDS[i] for i in order]


def test_the_heaviest_file_runs_first_and_a_files_tests_stay_in_their_order() -> None:
    durations = {
        "tests/unit/test_a.py": 1.0,
        "tests/cli/test_b.py": 5.0,
        "tests/integration/test_c.py": 300.0,
    }
    assert _files(heaviest_first(IDS, durations)) == [
        "tests/integration/test_c.py::test_1",
        "tests/cli/test_b.py::test_1[x]",
        "tests/cli/test_b.py::test_1[y]",
        # test_new.py is unknown: the median (5.0), after test_b.py, which was collected first
        "tests/unit/test_new.py::test_1",
        "tests/unit/test_a.py::test_1",
        "tests/unit/test_a.py::test_2",
    ]


def test_without_a_record_the_collected_order_stays() -> None:
    assert heaviest_first(IDS, {}) == list(range(len(IDS)))


def test_file_of_keeps_the_path_only() -> None:
    assert file_of("tests/cli/test_b.py::Class::test_1[a::b]") == "tests/cli/test_b.py"


def test_a_damaged_record_orders_nothing_and_a_good_one_is_read(tmp_path: Path) -> None:
    record = tmp_path / "durations.json"
    record.write_text(
        '{"tests/a.py": 2.5, "tests/b.py": "slow", "tests/c.py": -1, "tests/d.py": true}'
    )
    assert read_durations(record) == {"tests/a.py": 2.5}
    record.write_text("[1, 2]")
    assert read_durations(record) == {}
    record.write_text("{not json")
    assert read_durations(record) == {}
    assert read_durations(tmp_path / "missing.json") == {}


def test_a_fifo_in_place_of_the_record_does_not_hang(tmp_path: Path) -> None:
    record = tmp_path / "durations.json"
    record.write_text('{"tests/a.py": 2.5}')
    assert read_durations(record) == {"tests/a.py": 2.5}
    record.unlink()
    os.mkfifo(record)
    # opened without a writer, a FIFO would block: the reader must refuse what is not a file
    assert read_durations(record) == {}


def test_a_download_is_noted_once_per_line_and_listed_with_the_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "downloads.jsonl"
    monkeypatch.setenv(downloads.VARIABLE, str(log))
    downloads.note(
        "torch-2.10.0-cp311-none-linux_x86_64.whl", "the package index", 912_000_000, 41.5
    )
    downloads.note("torch's project JSON", "https://pypi.org/pypi/torch/json", 3_400_000, 0.8)
    assert (
        "[download] torch-2.10.0-cp311-none-linux_x86_64.whl: 912.0 MB" in capsys.readouterr().err
    )
    lines = log.read_text().splitlines()
    assert [json.loads(line)["bytes"] for line in lines] == [912_000_000, 3_400_000]

    class Reporter:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def section(self, title: str) -> None:
            self.lines.append(f"== {title}")

        def write_line(self, line: str) -> None:
            self.lines.append(line)

    reporter = Reporter()
    monkeypatch.setattr(downloads, "_MADE", [log])
    downloads.pytest_terminal_summary(reporter)
    assert reporter.lines == [
        "== downloads this run",
        "torch-2.10.0-cp311-none-linux_x86_64.whl: 912.0 MB from the package index in 41.5 s",
        "torch's project JSON: 3.4 MB from https://pypi.org/pypi/torch/json in 0.8 s",
        "in all: 2 downloads, 915.4 MB",
    ]
    log.write_text("")
    reporter.lines.clear()
    downloads.pytest_terminal_summary(reporter)
    assert reporter.lines == ["downloads: none (everything came from the tests' cache)"]


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


class _Config:
    def __init__(self, numprocesses: int | None) -> None:
        self.option = type("Option", (), {"numprocesses": numprocesses})()


def test_the_hook_orders_a_distributed_run_and_leaves_a_serial_one(
    request: pytest.FixtureRequest,
) -> None:
    # the plugin is the suite's (tests/conftest.py), not only importable
    assert request.config.pluginmanager.has_plugin("tests.support.schedule")
    light, heavy = "tests/unit/test_suite_asserts.py::x", "tests/cli/test_section_fuzz.py::y"
    assert schedule.read_durations()[file_of(heavy)] > schedule.read_durations()[file_of(light)]
    items = [_Item(light), _Item(heavy)]
    schedule.pytest_collection_modifyitems(_Config(2), items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [heavy, light]
    items = [_Item(light), _Item(heavy)]
    schedule.pytest_collection_modifyitems(_Config(None), items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [light, heavy]
