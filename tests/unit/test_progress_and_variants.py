"""Progress reporting helpers and the libtorch variant layout."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fdl.cli._console import Console
from fdl.cli._progress import ProgressLine, human_bytes, human_duration
from fdl.errors import UsageError
from fdl.libtorch import variants
from fdl.paths import Context


def test_human_units() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024**3) == "3.0 GiB"
    assert human_duration(59) == "59s"
    assert human_duration(3725) == "1h02m05s"


def test_progress_without_terminal_prints_sparse_lines() -> None:
    err = io.StringIO()
    progress = ProgressLine(Console(stderr=err), "download", interval=3600)
    for done in range(0, 100, 10):
        progress.bytes(done, 100)
    progress.bytes(100, 100)
    progress.close("done")
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("download: 0 B / 100 B (0%)")
    assert any("(100%)" in line for line in lines)
    assert len(lines) <= 3
    assert "\r" not in err.getvalue()


def test_quiet_progress_prints_nothing() -> None:
    err = io.StringIO()
    progress = ProgressLine(Console(verbosity=0, stderr=err), "x")
    progress.bytes(1, 1)
    progress.close("done")
    shown = io.StringIO()
    normal = ProgressLine(Console(verbosity=1, stderr=shown), "x")
    normal.bytes(1, 1)
    normal.close("done")
    assert "x: 1 B / 1 B (100%)" in shown.getvalue()  # the same progress, not quiet
    assert err.getvalue() == ""


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path, project=True)


def make_variant(context: Context, name: str) -> Path:
    directory = context.libtorch_dir / name
    (directory / "lib").mkdir(parents=True)
    return directory


@pytest.mark.parametrize(
    "bad",
    [
        "../../outside",
        "/abs/path",
        "precompiled/..",
        "other/x",
        "precompiled",
        "builds/a/b",
        "builds/.x",
    ],
)
def test_invalid_names_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        variants.validate_name(bad)


def test_activate_list_remove(context: Context) -> None:
    make_variant(context, "precompiled/cpu")
    make_variant(context, "builds/sm61-sm120")
    (context.libtorch_dir / "precompiled" / "empty").mkdir()
    assert variants.list_variants(context) == ["builds/sm61-sm120", "precompiled/cpu"]
    assert variants.active_name(context) is None
    variants.activate(context, "builds/sm61-sm120")
    assert (context.libtorch_dir / ".active").read_text() == "builds/sm61-sm120\n"
    with pytest.raises(UsageError) as info:
        variants.activate(context, "precompiled/empty")
    assert "builds/sm61-sm120, precompiled/cpu" in (info.value.hint or "")
    assert variants.remove(context, "builds/sm61-sm120") is True
    assert variants.active_name(context) is None
    assert (context.libtorch_dir / ".active").read_text() == ""
    assert variants.remove(context, "precompiled/cpu") is False
    assert variants.list_variants(context) == []


def test_activate_refuses_escapes_even_if_lib_exists(context: Context, tmp_path: Path) -> None:
    (tmp_path / "outside" / "lib").mkdir(parents=True)
    with pytest.raises(UsageError):
        variants.activate(context, "../outside")


def test_info_round_trip_and_reference_arch_file(context: Context) -> None:
    directory = make_variant(context, "builds/sm61-sm120")
    info = variants.VariantInfo(
        name="builds/sm61-sm120",
        torch="2.13.0",
        cuda="12.8",
        archs_requested=["6.1", "12.0"],
        archs_found={"cubin": ["6.1", "12.0"], "ptx": []},
        source={"kind": "build", "recipe": "pascal-blackwell"},
    )
    variants.write_info(directory, info)
    again = variants.read_info(directory, "builds/sm61-sm120")
    assert again.to_json() == info.to_json()
    arch = (directory / ".arch").read_text()
    assert "cuda=12.8\n" in arch and "archs=6.1 12.0\n" in arch and "source=compiled\n" in arch
    assert json.loads((directory / "variant.json").read_text())["schema"] == 1


def test_info_from_reference_arch_file_only(context: Context) -> None:
    directory = make_variant(context, "precompiled/cu126")
    (directory / ".arch").write_text(
        "cuda=12.6\ntorch=2.10.0\narchs=5.0 6.0 7.0\nsource=precompiled\n"
    )
    info = variants.read_info(directory, "precompiled/cu126")
    assert (info.torch, info.cuda, info.archs_requested) == (
        "2.10.0",
        "12.6",
        ["5.0", "6.0", "7.0"],
    )
    assert info.source == {"kind": "archive"}


def test_an_official_zip_recorded_as_download_reads_as_the_archive_source(
    context: Context,
) -> None:
    """fdl 0.5 recorded an official zip's kind as ``download``; the archive source records
    ``archive``. Old variant.json files read as today's, and the .arch file floDl reads
    says ``precompiled`` for both."""
    old = make_variant(context, "precompiled/cu126")
    (old / "variant.json").write_text(
        json.dumps({"schema": 1, "torch": "2.10.0", "source": {"kind": "download", "url": "u"}})
    )
    info = variants.read_info(old, "precompiled/cu126")
    assert info.source == {"kind": "archive", "url": "u"}
    assert "source=precompiled\n" in info.arch_file()
    new = variants.VariantInfo(name="precompiled/cpu", torch="2.13.0", source={"kind": "archive"})
    assert "source=precompiled\n" in new.arch_file()


def test_atomic_write_keeps_ordinary_permissions(tmp_path: Path) -> None:
    import os

    from fdl._files import atomic_write_text, file_sha256

    target = tmp_path / "sub" / "f.txt"
    atomic_write_text(target, "hello\n")
    umask = os.umask(0)
    os.umask(umask)
    assert target.read_text() == "hello\n"
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    atomic_write_text(target, "x", mode=0o755)
    assert target.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]
    import hashlib

    assert file_sha256(target) == hashlib.sha256(b"x").hexdigest()
