"""The parsed compatibility tables kept between runs (fdl.compat._data, <cache>/tables/):
the same text gives the same table without PyYAML, any other text is parsed again.
About 1 s (two interpreters)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fdl.compat import _data
from fdl.compat._data import TABLES, load_table, table_path

REPO = Path(__file__).resolve().parent.parent.parent

PROBE = """
import sys
from fdl.compat._data import load_table
table = load_table(sys.argv[1])
print(sorted(table), "yaml" in sys.modules)
"""


def _load(name: str, cache: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), FDL_CACHE_DIR=str(cache))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, name], env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def test_an_unchanged_table_is_read_without_the_yaml_parser(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _load("frameworks", cache)
    again = _load("frameworks", cache)
    assert first.endswith("True") and again.endswith("False"), (first, again)
    assert first[: -len("True")] == again[: -len("False")]
    entry = cache / "tables" / "frameworks.marshal"
    assert entry.stat().st_mode & 0o777 == 0o600
    assert (cache / "tables" / "CACHEDIR.TAG").exists()  # fdl made it: `fdl cache clean tables`


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty cache, and load_table's per-process memory cleared."""
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    load_table.cache_clear()
    yield tmp_path
    load_table.cache_clear()


@pytest.mark.parametrize("name", TABLES)
def test_every_table_kept_is_the_table_parsed(fresh: Path, name: str) -> None:
    parsed = yaml.safe_load(table_path(name).read_text(encoding="utf-8"))
    assert dict(load_table(name)) == parsed
    load_table.cache_clear()
    assert (fresh / "cache" / "tables" / f"{name}.marshal").exists()
    assert dict(load_table(name)) == parsed


def test_an_edited_table_is_parsed_again(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = fresh / "frameworks.yaml"
    copy.write_text(table_path("frameworks").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(_data, "table_path", lambda name: copy)
    before = load_table("frameworks")
    assert before.get("edited") is None
    load_table.cache_clear()
    with copy.open("a", encoding="utf-8") as table:
        table.write("edited: yes\n")
    assert load_table("frameworks")["edited"] is True


@pytest.mark.parametrize("content", [b"", b"not marshal", b"\xe9\x00\x00\x00"])
def test_a_damaged_entry_is_a_miss(fresh: Path, content: bytes) -> None:
    parsed = yaml.safe_load(table_path("gpus").read_text(encoding="utf-8"))
    entry = fresh / "cache" / "tables" / "gpus.marshal"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(content)
    assert dict(load_table("gpus")) == parsed
    load_table.cache_clear()
    assert dict(load_table("gpus")) == parsed  # rewritten


def test_a_cache_that_cannot_be_written_only_costs_the_parse(fresh: Path) -> None:
    (fresh / "cache").write_text("a file where the cache directory should be")
    parsed = yaml.safe_load(table_path("gpus").read_text(encoding="utf-8"))
    assert dict(load_table("gpus")) == parsed


def test_a_cache_directory_of_the_users_gets_no_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """FDL_CACHE_DIR naming a directory of the user's that has a `tables` directory fdl did
    not make (no CACHEDIR.TAG of fdl's): nothing is written into it."""
    mine = tmp_path / "my-files"
    (mine / "tables").mkdir(parents=True)
    monkeypatch.setenv("FDL_CACHE_DIR", str(mine))
    load_table.cache_clear()
    try:
        assert load_table("gpus")
    finally:
        load_table.cache_clear()
    assert list(mine.rglob("*")) == [mine / "tables"]
