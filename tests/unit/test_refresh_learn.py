"""A torch release newer than the tables, read from its own wheels on a fake PyPI (loopback)
by ``python -m fdl.refresh learn`` into fdl's cache, then planned with, labelled as read
from artefacts; offline, the tables' refusal stays (about 3 s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.compat import learned_path, parse_capability, release, resolve_torch_version
from fdl.errors import UsageError
from fdl.libtorch import select_variant
from fdl.refresh.__main__ import main
from tests.support.fake_pypi import publish
from tests.support.faulty_http import FaultyServer


@pytest.fixture(scope="module")
def pypi() -> Iterator[FaultyServer]:
    with FaultyServer() as server:
        publish(server)
        yield server


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_newer_release_is_refused_with_the_command_that_reads_it(cache: Path) -> None:
    with pytest.raises(UsageError) as refused:
        release("2.16.0")
    assert "newer than fdl's compatibility tables" in refused.value.message
    assert "python -m fdl.refresh learn 2.16.0" in str(refused.value.hint)


def test_learned_facts_are_planned_with_and_say_where_they_come_from(
    pypi: FaultyServer, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["learn", "2.16.0", "--pypi", pypi.url("/pypi")]) == 0
    shown = capsys.readouterr().out
    assert "read from its artefacts (torch-2.16.0-cp311-cp311-manylinux" in shown
    assert learned_path("2.16") == cache / "compat" / "torch" / "2.16.json"
    learned = release("2.16.0")
    assert learned.provenance and "not from fdl's reviewed tables" in learned.provenance
    assert resolve_torch_version("2.16") == "2.16.0"
    assert learned.source.python_min == "3.11" and not learned.source.verified
    default = next(v for v in learned.variants if v.default)
    assert (default.name, default.cuda, default.cudnn) == ("cu132", "13.2", "9.26.0.51")
    assert default.targets.torch_cuda_arch_list() == "7.5;9.0;12.0+PTX"  # streamed
    assert "download.pytorch.org was not read" in shown  # its LibTorch zips are assumed
    chosen = select_variant([parse_capability("8.6")], torch="2.16.0", driver="610.10")
    assert chosen.torch_version == "2.16.0"
    assert learned.provenance in chosen.warnings
    tables = select_variant([parse_capability("8.6")], torch="2.15.0", driver="610.10")
    assert not any("artefacts" in w for w in tables.warnings)


def test_offline_the_refusal_stays(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["learn", "2.16.0", "--pypi", "http://127.0.0.1:9/pypi"]) == 5
    assert "stays refused" in capsys.readouterr().err
    assert not learned_path("2.16").exists()
    with pytest.raises(UsageError):
        release("2.16.0")


def test_a_release_the_tables_know_or_pypi_lacks_is_not_read(
    pypi: FaultyServer, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["learn", "2.14.1", "--pypi", pypi.url("/pypi")]) == 0
    assert "reviewed tables" in capsys.readouterr().out
    assert main(["learn", "2.17.0", "--pypi", pypi.url("/pypi")]) == 2  # only an rc
    assert "PyPI has no final torch 2.17.0" in capsys.readouterr().err
    assert not (cache / "compat").exists()


_CRAFTED = {
    "version": "2.16",
    "patches": ["2.16.0"],
    "source": {"cmake_min": "3.27", "cxx_standard": 17, "python_min": "3.10"},
    "variants": [1, 2],
    "read_from": "x",
    "read_on": "y",
}


@pytest.mark.parametrize(
    "text",
    [json.dumps({"version": "2.16"}), "[" * 200_000, json.dumps(_CRAFTED)],
    ids=["fields missing", "nested", "variants that are no mappings"],
)
def test_a_damaged_cache_file_is_named_with_the_fix(cache: Path, text: str) -> None:
    path = learned_path("2.16")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(UsageError) as damaged:
        release("2.16")
    assert str(path) in damaged.value.message
    assert damaged.value.hint == "read them again: python -m fdl.refresh learn 2.16"


def test_a_cache_file_that_is_a_fifo_is_named_without_a_hang(cache: Path) -> None:
    import os

    path = learned_path("2.16")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(UsageError) as damaged:
        release("2.16")
    assert str(path) in damaged.value.message and "FIFO" in damaged.value.message
    assert "python -m fdl.refresh learn 2.16" in (damaged.value.hint or "")


def test_metadata_only_facts_refuse_their_archs_rather_than_guess(
    pypi: FaultyServer, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fdl.compat import NewerRelease

    assert main(["learn", "2.16.0", "--metadata-only", "--pypi", pypi.url("/pypi")]) == 0
    assert "archs not read" in capsys.readouterr().out
    default = next(v for v in release("2.16.0").variants if v.default)
    with pytest.raises(NewerRelease) as unread:
        default.targets_for("2.16.0")
    assert unread.value.archs and unread.value.version == "2.16.0"
    assert "python -m fdl.refresh learn 2.16.0" in str(unread.value.hint)
    # no GPU to check: the CPU build is chosen without them
    assert select_variant([], torch="2.16.0").variant == "cpu"
