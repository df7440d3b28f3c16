"""Reading a few members of a .crate (gzip tar) without extracting it: the members asked
for, in one bounded pass; a truncated archive, a decompression bomb, a climbing name or a
link for a wanted member is refused, and nothing is written."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from fdl.archive import ArchiveError, read_tar_members


def _archive(tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    path = tmp_path / "x.crate"
    path.write_bytes(buffer.getvalue())
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_the_members_asked_for_are_read_and_the_rest_left(tmp_path: Path) -> None:
    path = _archive(tmp_path, [_file("c-1.0.0/a.rs", b"a"), _file("c-1.0.0/b.rs", b"bb")])
    found = read_tar_members(path, ["c-1.0.0/b.rs", "c-1.0.0/absent.rs"])
    assert dict(found) == {"c-1.0.0/b.rs": b"bb"}
    assert 0 < found.bytes_read <= path.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.crate"]


def test_a_decompression_bomb_stops_at_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "bomb.crate"
    header = tarfile.TarInfo("c-1.0.0/huge.rs")
    header.size = 64 << 20
    with gzip.open(path, "wb") as stream:  # 64 MiB of zeros: about 64 KiB on disk
        stream.write(header.tobuf())
        for _ in range(64):
            stream.write(bytes(1 << 20))
    with pytest.raises(ArchiveError, match="unpacks to more than 1048576 bytes"):
        read_tar_members(path, ["c-1.0.0/build.rs"], max_unpacked=1 << 20)


def test_a_truncated_archive_is_not_taken_for_its_end(tmp_path: Path) -> None:
    path = _archive(tmp_path, [_file("c-1.0.0/a.rs", b"a" * 100_000)])
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ArchiveError, match="not a complete tar archive"):
        read_tar_members(path, ["c-1.0.0/build.rs"])


def test_a_link_for_a_wanted_member_and_a_climbing_name_are_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("c-1.0.0/build.rs")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(ArchiveError, match="is a link or special file"):
        read_tar_members(_archive(tmp_path, [(link, None)]), ["c-1.0.0/build.rs"])
    climbing = _archive(tmp_path, [_file("c-1.0.0/../../x", b"x")])
    with pytest.raises(ArchiveError, match=r"'\.\.' in the path"):
        read_tar_members(climbing, ["c-1.0.0/build.rs"])
