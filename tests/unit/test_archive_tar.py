"""Tar archives get the same checks as zips."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from fdl import archive
from fdl.archive import ArchiveError


def make_tar(path: Path, members: list[tuple[str, bytes, bytes, str]]) -> Path:
    """(name, type, content, linkname) members; type is a tarfile type constant."""
    with tarfile.open(path, "w:gz") as out:
        for name, kind, content, linkname in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            info.linkname = linkname
            if kind == tarfile.REGTYPE:
                info.size = len(content)
                out.addfile(info, io.BytesIO(content))
            else:
                out.addfile(info)
    return path


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_good_tar_with_prefix_links_and_modes(tmp_path):
    path = make_tar(
        tmp_path / "a.tar.gz",
        [
            ("pkg/", tarfile.DIRTYPE, b"", ""),
            ("pkg/bin/run.sh", tarfile.REGTYPE, b"#!/bin/sh\n", ""),
            ("pkg/lib/libx.so.1", tarfile.REGTYPE, b"x", ""),
            ("pkg/lib/libx.so", tarfile.SYMTYPE, b"", "libx.so.1"),
            ("pkg/lib/hard", tarfile.LNKTYPE, b"", "pkg/lib/libx.so.1"),
            ("NOTICE", tarfile.REGTYPE, b"n", ""),
        ],
    )
    target = tmp_path / "out"
    result = archive.safe_extract_tar(path, target, strip_prefix="pkg")
    assert tree(target) == ["bin", "bin/run.sh", "lib", "lib/hard", "lib/libx.so", "lib/libx.so.1"]
    assert os.readlink(target / "lib/libx.so") == "libx.so.1"
    assert (target / "lib/hard").read_bytes() == b"x"
    assert stat.S_IMODE((target / "bin/run.sh").stat().st_mode) & 0o111
    assert result.skipped == ("NOTICE",)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "out"]


BAD = {
    "tar slip": [("../evil", tarfile.REGTYPE, b"x", "")],
    "absolute": [("/tmp/fdl-tar-evil", tarfile.REGTYPE, b"x", "")],
    "symlink escaping": [("l", tarfile.SYMTYPE, b"", "../..")],
    "symlink then file through it": [
        ("l", tarfile.SYMTYPE, b"", "."),
        ("l/x", tarfile.REGTYPE, b"x", ""),
    ],
    "hard link outside": [("h", tarfile.LNKTYPE, b"", "../etc/passwd")],
    "device": [("null", tarfile.CHRTYPE, b"", "")],
    "fifo": [("pipe", tarfile.FIFOTYPE, b"", "")],
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tar_is_refused_and_nothing_is_written(tmp_path, case):
    path = make_tar(tmp_path / "bad.tar.gz", BAD[case])
    before = tree(tmp_path)
    with pytest.raises(ArchiveError, match="refusing member"):
        archive.safe_extract_tar(path, tmp_path / "out")
    assert tree(tmp_path) == before
    assert not Path("/tmp/fdl-tar-evil").exists()
