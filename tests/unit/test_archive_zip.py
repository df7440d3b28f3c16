"""Zip archives: integrity test, safe extraction (malicious members refused), reading a member."""

from __future__ import annotations

import os
import stat
import uuid
import warnings
import zipfile
from pathlib import Path

import pytest

from fdl import archive
from fdl.archive import ArchiveError

LINK = stat.S_IFLNK | 0o777


def make_zip(path: Path, members: list[tuple[str, bytes, int | None]]) -> Path:
    """A zip with (name, content, unix mode or None) members, in order."""
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        warnings.simplefilter("ignore")  # "Duplicate name" is what one case wants
        for name, content, mode in members:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode is not None:
                info.create_system = 3
                info.external_attr = mode << 16
            out.writestr(info, content)
    return path


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is (and a symlink's target)."""
    seen: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            kind = (
                "link:" + os.readlink(full)
                if full.is_symlink()
                else ("dir" if full.is_dir() else "file")
            )
            seen[str(full.relative_to(root))] = kind
    return seen


LIBTORCH = [
    ("libtorch/", b"", stat.S_IFDIR | 0o755),
    ("libtorch/build-version", b"2.8.0+cu128\n", stat.S_IFREG | 0o644),
    ("libtorch/bin/torch_shm_manager", b"\x7fELF...", stat.S_IFREG | 0o755),
    ("libtorch/lib/libc10.so.1", b"c10 library", stat.S_IFREG | 0o644),
    ("libtorch/lib/libc10.so", b"libc10.so.1", LINK),
    ("libtorch/include/torch/torch.h", b"#pragma once\n", None),
    ("README.txt", b"outside the prefix", None),
]


def test_extracts_a_good_archive_with_prefix_links_and_exec_bits(tmp_path):
    zip_path = make_zip(tmp_path / "lt.zip", LIBTORCH)
    target = tmp_path / "precompiled" / "cu128"
    result = archive.safe_extract_zip(zip_path, target, strip_prefix="libtorch")
    assert (target / "build-version").read_text() == "2.8.0+cu128\n"
    assert (target / "include/torch/torch.h").read_bytes() == b"#pragma once\n"
    assert os.readlink(target / "lib/libc10.so") == "libc10.so.1"
    assert (target / "lib/libc10.so").read_bytes() == b"c10 library"
    assert stat.S_IMODE((target / "bin/torch_shm_manager").stat().st_mode) == 0o755
    assert stat.S_IMODE((target / "build-version").stat().st_mode) == 0o644
    assert result.files == 4 and result.symlinks == 1
    assert result.skipped == ("README.txt",)
    # Only the target appeared beside it: the staging directory is gone.
    assert sorted(p.name for p in target.parent.iterdir()) == ["cu128"]


def test_setuid_and_world_writable_bits_are_dropped(tmp_path):
    zip_path = make_zip(
        tmp_path / "a.zip", [("tool", b"x", stat.S_IFREG | 0o4777), ("data", b"y", 0o666)]
    )
    archive.safe_extract_zip(zip_path, tmp_path / "out")
    assert stat.S_IMODE((tmp_path / "out/tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "out/data").stat().st_mode) == 0o644


def test_progress_reaches_the_total(tmp_path):
    zip_path = make_zip(tmp_path / "a.zip", [("a", b"1" * 3000, None), ("b/c", b"2" * 5000, None)])
    seen: list[tuple[int, int]] = []
    archive.safe_extract_zip(
        zip_path, tmp_path / "out", on_progress=lambda done, total: seen.append((done, total))
    )
    assert seen[-1] == (8000, 8000)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


OUTSIDE = f"fdl-zip-escape-{uuid.uuid4().hex}"

MALICIOUS = {
    "zip slip": [("ok.txt", b"fine", None), ("../evil.txt", b"pwned", None)],
    "nested zip slip": [("a/b/../../../evil.txt", b"pwned", None)],
    "absolute path": [(f"/tmp/{OUTSIDE}", b"pwned", None)],
    "drive letter": [("C:/Windows/evil.dll", b"pwned", None)],
    "backslash": [("..\\evil.txt", b"pwned", None)],
    "symlink escaping": [("escape", b"..", LINK)],
    "absolute symlink": [("escape", b"/etc", LINK)],
    "symlink then file through it": [("escape", b"..", LINK), ("escape/evil.txt", b"pwned", None)],
    "inside symlink then file through it": [
        ("sub/", b"", stat.S_IFDIR | 0o755),
        ("link", b"sub", LINK),
        ("link/x", b"1", None),
    ],
    "file then symlink on its parent": [("dir/evil.txt", b"pwned", None), ("dir", b"/tmp", LINK)],
    "symlink chain escaping": [
        ("x/y/q", b"../..", LINK),
        ("x/y/p", b"q/../../..", LINK),
    ],
    "symlink loop": [("a", b"b", LINK), ("b", b"a/c", LINK)],
    "character device": [("dev/null", b"", stat.S_IFCHR | 0o666)],
    "block device": [("dev/sda", b"", stat.S_IFBLK | 0o660)],
    "fifo": [("pipe", b"", stat.S_IFIFO | 0o644)],
    "socket": [("sock", b"", stat.S_IFSOCK | 0o644)],
    "duplicate name": [("a.txt", b"1", None), ("a.txt", b"2", None)],
    "file and directory": [("a", b"1", None), ("a/b", b"2", None)],
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_archive_is_refused_and_nothing_is_written(tmp_path, case):
    work = tmp_path / "work"
    work.mkdir()
    (work / "existing.txt").write_text("keep me")
    zip_path = make_zip(tmp_path / "bad.zip", MALICIOUS[case])
    before = snapshot(tmp_path)
    with pytest.raises(ArchiveError) as caught:
        archive.safe_extract_zip(zip_path, work / "target")
    assert "refusing member" in str(caught.value)
    assert caught.value.hint
    assert snapshot(tmp_path) == before  # the parent holds exactly what it held
    assert not Path("/tmp", OUTSIDE).exists()


def test_refusal_names_the_member(tmp_path):
    zip_path = make_zip(tmp_path / "bad.zip", MALICIOUS["zip slip"])
    with pytest.raises(ArchiveError, match=r"'\.\./evil\.txt'.*'\.\.'"):
        archive.safe_extract_zip(zip_path, tmp_path / "target")


def test_symlink_escaping_after_prefix_strip_is_refused(tmp_path):
    # Inside the archive this stays inside, but not below the stripped prefix.
    zip_path = make_zip(tmp_path / "a.zip", [("libtorch/lib/x", b"../../other", LINK)])
    with pytest.raises(ArchiveError, match="outside the target"):
        archive.safe_extract_zip(zip_path, tmp_path / "t", strip_prefix="libtorch")


def test_symlink_chain_staying_inside_is_kept(tmp_path):
    members = [
        ("lib/libx.so.1.2", b"x", None),
        ("lib/libx.so.1", b"libx.so.1.2", LINK),
        ("lib/libx.so", b"libx.so.1", LINK),
        ("lib64", b"lib", LINK),
    ]
    target = tmp_path / "t"
    archive.safe_extract_zip(make_zip(tmp_path / "a.zip", members), target)
    assert (target / "lib64/libx.so").read_bytes() == b"x"


def test_existing_target_is_refused_unless_replaced(tmp_path):
    zip_path = make_zip(tmp_path / "a.zip", [("new.txt", b"new", None)])
    target = tmp_path / "t"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(ArchiveError, match="already exists"):
        archive.safe_extract_zip(zip_path, target)
    assert (target / "old.txt").exists()
    archive.safe_extract_zip(zip_path, target, replace=True)
    assert sorted(os.listdir(target)) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip", "t"]


def test_missing_prefix_is_a_clear_error(tmp_path):
    zip_path = make_zip(tmp_path / "a.zip", [("other/x", b"1", None)])
    with pytest.raises(ArchiveError, match="nothing under libtorch/"):
        archive.safe_extract_zip(zip_path, tmp_path / "t", strip_prefix="libtorch/")


def _stored_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        out.writestr("libtorch/first.txt", b"A" * 1000)
        out.writestr("libtorch/second.txt", b"B" * 1000)
    return path


def _flip_in_member(path: Path, name: str) -> None:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    data = bytearray(path.read_bytes())
    header = info.header_offset
    name_len = int.from_bytes(data[header + 26 : header + 28], "little")
    extra_len = int.from_bytes(data[header + 28 : header + 30], "little")
    data[header + 30 + name_len + extra_len + 10] ^= 0xFF
    path.write_bytes(bytes(data))


def test_test_zip_accepts_a_good_archive(tmp_path):
    assert archive.test_zip(_stored_zip(tmp_path / "a.zip")) == 2


def test_test_zip_names_the_first_corrupt_member(tmp_path):
    path = _stored_zip(tmp_path / "a.zip")
    _flip_in_member(path, "libtorch/second.txt")
    with pytest.raises(ArchiveError, match=r"'libtorch/second\.txt' is corrupt"):
        archive.test_zip(path)


def test_corrupt_member_during_extraction_leaves_nothing(tmp_path):
    path = _stored_zip(tmp_path / "a.zip")
    _flip_in_member(path, "libtorch/second.txt")
    with pytest.raises(ArchiveError, match=r"second\.txt"):
        archive.safe_extract_zip(path, tmp_path / "t", strip_prefix="libtorch")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip"]


def test_html_page_saved_as_zip_is_recognised(tmp_path):
    path = tmp_path / "libtorch.zip"
    path.write_bytes(b"<!DOCTYPE html><html><body>404 Not Found</body></html>")
    with pytest.raises(ArchiveError) as caught:
        archive.test_zip(path)
    assert "not a readable zip" in str(caught.value)
    assert "web page" in (caught.value.hint or "")


def test_truncated_zip_is_refused(tmp_path):
    path = _stored_zip(tmp_path / "a.zip")
    path.write_bytes(path.read_bytes()[:1500])
    with pytest.raises(ArchiveError, match="not a readable zip"):
        archive.test_zip(path)


def test_read_member(tmp_path):
    path = make_zip(tmp_path / "a.zip", LIBTORCH)
    assert archive.read_member(path, "libtorch/build-version") == b"2.8.0+cu128\n"
    with pytest.raises(ArchiveError, match="no member 'libtorch/build-hash'"):
        archive.read_member(path, "libtorch/build-hash")
    with pytest.raises(ArchiveError, match="larger than"):
        archive.read_member(path, "libtorch/build-version", max_bytes=4)


def test_stale_staging_directories_are_removed(tmp_path):
    target = tmp_path / "cu128"
    (tmp_path / ".cu128.staging-abc").mkdir()
    (tmp_path / ".cu128.old-def").mkdir()
    (tmp_path / ".cu126.staging-xyz").mkdir()
    removed = archive.remove_stale_staging(target)
    assert sorted(p.name for p in removed) == [".cu128.old-def", ".cu128.staging-abc"]
    assert (tmp_path / ".cu126.staging-xyz").exists()


def test_a_bomb_is_refused_by_its_declared_sizes_before_anything_is_read(
    tmp_path, monkeypatch
) -> None:
    """8 MiB of zeros in a few KB: refused by ratio (the floor lowered to test it small)."""
    from fdl.archive import _plan

    monkeypatch.setattr(_plan, "RATIO_FLOOR", 1 << 20)
    bomb = make_zip(tmp_path / "bomb.zip", [("libtorch/lib/zeros.so", bytes(8 << 20), None)])
    assert bomb.stat().st_size < (8 << 20) // 100
    for call in (
        lambda: archive.test_zip(bomb),
        lambda: archive.safe_extract_zip(bomb, tmp_path / "out", strip_prefix="libtorch"),
    ):
        with pytest.raises(ArchiveError, match="decompression bomb"):
            call()
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.zip"]


def test_content_larger_than_any_libtorch_is_refused(tmp_path, monkeypatch) -> None:
    from fdl.archive import _plan

    monkeypatch.setattr(_plan, "MAX_UNPACKED_BYTES", 1 << 20)
    big = make_zip(tmp_path / "big.zip", [("libtorch/lib/a.so", os.urandom(2 << 20), None)])
    with pytest.raises(ArchiveError, match="more than any libtorch"):
        archive.test_zip(big)


def test_real_sized_archives_pass_the_size_checks(tmp_path) -> None:
    """A well-compressed but honest archive (text, 20x) is below the floor: accepted."""
    text = b"libtorch symbol table line\n" * 200_000  # 5.4 MB, compresses well
    ok = make_zip(tmp_path / "ok.zip", [("libtorch/lib/symbols.txt", text, None)])
    assert archive.test_zip(ok) == 1
