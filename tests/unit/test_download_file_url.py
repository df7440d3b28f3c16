"""file:// downloads (air-gapped mirrors): same guarantees as HTTP, Range included."""

from __future__ import annotations

import hashlib
import os

import pytest

from fdl.net import NotFound, download


@pytest.fixture
def mirror(tmp_path):
    root = tmp_path / "mirror"
    (root / "libtorch/cpu").mkdir(parents=True)
    data = os.urandom(300_000)
    (root / "libtorch/cpu/lt.zip").write_bytes(data)
    return root, data


def test_file_url(mirror, tmp_path):
    root, data = mirror
    dest = tmp_path / "out/lt.zip"
    result = download(
        (root / "libtorch/cpu/lt.zip").as_uri(), dest, sha256=hashlib.sha256(data).hexdigest()
    )
    assert dest.read_bytes() == data
    assert result.bytes_transferred == len(data)


def test_file_mirror_of_an_https_url(mirror, tmp_path):
    root, data = mirror
    result = download(
        "https://download.pytorch.org/libtorch/cpu/lt.zip",
        tmp_path / "lt.zip",
        mirror=root.as_uri(),
    )
    assert (tmp_path / "lt.zip").read_bytes() == data
    assert result.url == (root / "libtorch/cpu/lt.zip").as_uri()


class Interrupt(Exception):
    """Stands for Ctrl-C in the middle of a download."""


def test_interrupted_download_is_resumed_by_the_next_run(mirror, tmp_path):
    root, data = mirror
    url = (root / "libtorch/cpu/lt.zip").as_uri()
    dest = tmp_path / "lt.zip"

    def interrupt(progress):
        raise Interrupt

    with pytest.raises(Interrupt):
        download(url, dest, on_progress=interrupt, chunk_size=64_000)
    assert not dest.exists()
    assert (tmp_path / "lt.zip.part").stat().st_size == 64_000
    result = download(url, dest)
    assert dest.read_bytes() == data
    assert result.resumed_from == 64_000
    assert result.bytes_transferred == len(data) - 64_000


def test_part_of_a_changed_file_is_not_resumed(mirror, tmp_path):
    root, _ = mirror
    source = root / "libtorch/cpu/lt.zip"
    dest = tmp_path / "lt.zip"

    def interrupt(progress):
        raise Interrupt

    with pytest.raises(Interrupt):
        download(source.as_uri(), dest, on_progress=interrupt, chunk_size=64_000)
    new = os.urandom(200_000)
    source.write_bytes(new)
    os.utime(source, ns=(1, 1))  # another mtime: another validator
    result = download(source.as_uri(), dest)
    assert dest.read_bytes() == new
    assert result.resumed_from == 0


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(NotFound, match="not found"):
        download((tmp_path / "nope.zip").as_uri(), tmp_path / "x.zip")
    assert not (tmp_path / "x.zip").exists()
    assert not (tmp_path / "x.zip.part").exists()


def test_unsupported_scheme(tmp_path):
    from fdl.errors import NetworkError

    with pytest.raises(NetworkError, match="unsupported URL scheme 'ftp'"):
        download("ftp://example.org/x.zip", tmp_path / "x.zip")
