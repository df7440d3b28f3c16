"""The facts a framework release states in its crates, as fdl reads them: every statement
counted (floDl's scaffold states its libtorch in three Dockerfiles), disagreement and values
outside the grammar refused with the way out; cargo's unpacked copy read without following
links or reading past the bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.libtorch import (
    CrateFactError,
    CrateSourceError,
    facts_from_texts,
    read_framework_release,
)
from tests.support.fake_crates import REGISTRY_DIR, flodl_files


def test_every_statement_is_read_and_named_by_its_lines() -> None:
    texts = flodl_files(torch="2.11.0")
    texts["flodl-cli"]["src/init.rs"] += "\nARG LIBTORCH_VERSION=2.11.0\n"
    torch, cxx, facts = facts_from_texts("flodl", "floDl", "0.99.0", texts)
    assert (torch, cxx) == ("2.11.0", 17)
    assert 'flodl-cli src/init.rs:3/6 LIBTORCH_VERSION "2.11.0"' in facts


def test_statements_that_disagree_are_refused_naming_each() -> None:
    texts = flodl_files(torch="2.11.0")
    texts["flodl-cli"]["src/init.rs"] += "\nARG LIBTORCH_VERSION=2.12.0\n"
    with pytest.raises(CrateFactError) as caught:
        facts_from_texts("flodl", "floDl", "0.99.0", texts)
    assert "state the libtorch release differently" in caught.value.message
    assert "'2.12.0' at flodl-cli src/init.rs:6" in caught.value.message
    assert "libtorch.framework-check: false" in (caught.value.hint or "")


def test_a_missing_crate_file_is_said_with_the_files_looked_in() -> None:
    texts = flodl_files()
    del texts["flodl-sys"]
    with pytest.raises(CrateFactError, match="do not state the C\\+\\+ standard fdl reads"):
        facts_from_texts("flodl", "floDl", "0.99.0", texts)


def test_a_huge_unpacked_build_script_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    unpacked = tmp_path / "cargo" / "registry" / "src" / REGISTRY_DIR / "torch-sys-0.99.0"
    unpacked.mkdir(parents=True)
    (unpacked / ".cargo-ok").write_text("")
    with open(unpacked / "build.rs", "wb") as sparse:
        sparse.truncate(50 << 20)  # 50 MB of holes: nothing is written to the disk
    with pytest.raises(CrateSourceError, match="is more than 4194304 bytes"):
        read_framework_release("tch", "tch-rs", "0.99.0", home=tmp_path / "cargo")
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.json"))


def test_a_fifo_for_a_build_script_does_not_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    unpacked = tmp_path / "cargo" / "registry" / "src" / REGISTRY_DIR / "torch-sys-0.99.0"
    unpacked.mkdir(parents=True)
    (unpacked / ".cargo-ok").write_text("")
    os.mkfifo(unpacked / "build.rs")
    with pytest.raises(CrateSourceError, match="is not a regular file"):
        read_framework_release("tch", "tch-rs", "0.99.0", home=tmp_path / "cargo")
