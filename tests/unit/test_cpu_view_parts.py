"""The parts of the CPU view that need no server: which byte ranges hold the members
(plan_spans, zip_members' member ends), reading a project page of a package index
(PEP 691 JSON, PEP 503 HTML), and choosing the torch wheel (the RECORD: tests/unit/test_formats_wheel.py)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import pytest

from fdl.archive import ArchiveError, Span, ZipMember, extract_span, plan_spans, zip_members
from fdl.errors import NetworkError, UsageError
from fdl.libtorch.sources._cpu_view import choose_wheel
from fdl.net import IndexFile
from fdl.net._index import parse_index_page
from tests.support.cpu_view_wheels import torch_members, wheel_bytes

PAGE = "https://mirror.example/simple/torch/"
JSON = "application/vnd.pypi.simple.v1+json"
SHA = hashlib.sha256(b"x").hexdigest()


def member(name: str, offset: int, compressed: int, end: int = 0) -> ZipMember:
    return ZipMember(name, 8, compressed, compressed * 3, offset, 0, end)


# --- plan_spans --------------------------------------------------------------------------


def test_members_closer_than_the_gap_share_a_range() -> None:
    a = member("a", 0, 100, end=130)
    b = member("b", 1000, 100, end=1150)  # 870 bytes after a's end: within the gap
    c = member("c", 10_000, 50, end=10_080)  # far: a range of its own
    spans = plan_spans([c, a, b], gap=1000)
    assert spans == [Span(0, 1150, (a, b)), Span(10_000, 80, (c,))]


def test_a_gap_just_over_the_limit_splits() -> None:
    a = member("a", 0, 100, end=200)
    b = member("b", 1201, 10, end=1300)
    assert [s.members for s in plan_spans([a, b], gap=1000)] == [(a,), (b,)]
    assert [s.members for s in plan_spans([a, b], gap=1001)] == [(a, b)]


def test_a_range_ends_where_the_next_member_starts(tmp_path: Path) -> None:
    """The end comes from the directory (the next local header), never from a guess: the
    range is exactly the member's header, name, extra field and data."""
    members = torch_members()
    data = wheel_bytes(members)
    found = zip_members("mem://w.whl", _reader(data))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = sorted(archive.infolist(), key=lambda i: i.header_offset)
        directory_at = len(data) - 22 - sum(46 + len(i.filename) for i in infos)
    for info, after in zip(infos, [*infos[1:], None], strict=True):
        assert found[info.filename].end == (after.header_offset if after else directory_at)
    gomp = found["torch/lib/libgomp.so.1"]
    (span,) = plan_spans([gomp], gap=0)
    assert (span.start, span.start + span.length) == (gomp.local_offset, gomp.end)
    target = tmp_path / "libgomp.so.1"
    extract_span("w.whl", span, _span_file(data, span, tmp_path), lambda _m: target)
    assert target.read_bytes() == members["torch/lib/libgomp.so.1"]


def test_a_member_without_a_known_end_gets_room_for_its_header() -> None:
    lone = member("torch/lib/x.so", 500, 1000)
    (span,) = plan_spans([lone])
    assert span.start == 500 and span.length == 30 + 0xFFFF * 2 + 1000


# --- extract_span ------------------------------------------------------------------------


def _reader(data: bytes):
    def read(url: str, start: int, length: int | None = None) -> tuple[bytes, int]:
        if start < 0:
            start = max(0, len(data) + start)
        return data[start : None if length is None else start + length], len(data)

    return read


def _span_file(data: bytes, span: Span, folder: Path) -> Path:
    """The span's bytes in a file, as fetch_range leaves them in the cache."""
    path = folder / f"{span.start}-{span.length}"
    path.write_bytes(data[span.start : span.start + span.length])
    return path


def _extract(data: bytes, name: str, tmp_path: Path) -> Path:
    found = zip_members("mem://w.whl", _reader(data))
    (span,) = plan_spans([found[name]])
    target = tmp_path / "out"
    extract_span("w.whl", span, _span_file(data, span, tmp_path), lambda _m: target)
    return target


def test_a_member_whose_bytes_do_not_match_its_crc32(tmp_path: Path) -> None:
    data = bytearray(wheel_bytes({"torch/lib/a.so": b"A" * 5000}, stored=["torch/lib/a.so"]))
    data[30 + len("torch/lib/a.so") + 2500] ^= 0x01
    with pytest.raises(
        ArchiveError, match=re.escape("torch/lib/a.so inflated to 5000 bytes with another")
    ):
        _extract(bytes(data), "torch/lib/a.so", tmp_path)


def test_a_local_header_that_names_another_member(tmp_path: Path) -> None:
    data = bytearray(wheel_bytes({"torch/lib/a.so": b"A" * 50, "torch/lib/b.so": b"B"}))
    data[30 + len("torch/lib/a.so") - 4] = ord("b")
    with pytest.raises(ArchiveError, match=re.escape("names torch/lib/b.so, not torch/lib/a.so")):
        _extract(bytes(data), "torch/lib/a.so", tmp_path)


def test_a_member_name_that_leaves_the_tree(tmp_path: Path) -> None:
    data = wheel_bytes({"torch/include/../../evil.h": b"x"})
    with pytest.raises(ArchiveError, match=re.escape("'..'")):
        _extract(data, "torch/include/../../evil.h", tmp_path)
    assert not (tmp_path / "out").exists()


# --- parse_index_page --------------------------------------------------------------------


def test_a_json_page_with_relative_urls_yanked_files_and_bad_hashes() -> None:
    page = {
        "meta": {"api-version": "1.1"},
        "files": [
            {
                "filename": "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                "url": "../../packages/ab/cd/torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                "hashes": {"sha256": SHA},
                "size": 915_000_000,
                "requires-python": ">=3.10",
            },
            {
                "filename": "torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                "url": "https://files.example/t.whl",
                "hashes": {"sha256": "not-hex" * 9},
                "size": -5,
                "yanked": "broken build",
            },
            {"filename": "short.whl", "url": "/short.whl", "hashes": {"sha256": SHA[:40]}},
            {"filename": "listed.whl", "url": "x.whl", "hashes": [SHA], "yanked": False},
            {"filename": 5, "url": "x.whl"},
            "not an object",
            {"filename": "no-url.whl"},
        ],
    }
    files = parse_index_page(json.dumps(page).encode(), JSON, PAGE)
    assert files == [
        IndexFile(
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "https://mirror.example/packages/ab/cd/"
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            SHA,
            915_000_000,
            ">=3.10",
            False,
        ),
        IndexFile(
            "torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "https://files.example/t.whl",
            None,
            None,
            None,
            True,
        ),
        IndexFile("short.whl", "https://mirror.example/short.whl", None),
        IndexFile("listed.whl", PAGE + "x.whl", None),
    ]


def test_json_is_read_whatever_the_content_type_says() -> None:
    body = json.dumps({"files": [{"filename": "a.whl", "url": "a.whl"}]}).encode()
    assert parse_index_page(body, "text/plain", PAGE)[0].url == PAGE + "a.whl"


def test_an_html_page_with_relative_links_and_hash_fragments() -> None:
    body = f"""<!DOCTYPE html><html><body>
    <a href="../../files/torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={SHA}"
       data-requires-python="&gt;=3.10">torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl</a>
    <a href="/files/old.whl#sha256=XYZ" data-yanked="">old.whl</a>
    <a href="https://elsewhere.example/x.whl#md5=abc"></a>
    </body></html>""".encode()
    files = parse_index_page(body, "text/html", PAGE)
    assert files == [
        IndexFile(
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "https://mirror.example/files/torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            SHA,
            None,
            ">=3.10",
            False,
        ),
        IndexFile("old.whl", "https://mirror.example/files/old.whl", None, None, None, True),
        IndexFile("x.whl", "https://elsewhere.example/x.whl", None),
    ]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"<html><body>Service Unavailable</body></html>", "text/html"),
        (b"[1, 2]", JSON),
        (b"{not json", JSON),
        (b'{"files": "none"}', JSON),
        (b"[" * 100_000 + b"]" * 100_000, JSON),
        (b'{"files": [' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"]}", JSON),
    ],
    ids=["html", "json-list", "broken-json", "files-not-a-list", "deep-list", "deep-object"],
)
def test_a_page_that_is_not_an_index_page(body: bytes, kind: str) -> None:
    with pytest.raises(NetworkError, match=re.escape(PAGE)):
        parse_index_page(body, kind, PAGE)


# --- choose_wheel ------------------------------------------------------------------------


def files(*names: str, yanked: tuple[str, ...] = ()) -> list[IndexFile]:
    return [IndexFile(n, f"https://files.example/{n}", yanked=n in yanked) for n in names]


def test_a_cpu_build_is_preferred_to_the_cuda_one() -> None:
    chosen = choose_wheel(
        files(
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torch-2.10.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",
            "torch-2.10.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl",
        ),
        "2.10.0",
    )
    assert chosen.filename == "torch-2.10.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert chosen.version == "2.10.0+cpu"


def test_the_highest_build_tag_wins() -> None:
    chosen = choose_wheel(
        files(
            "torch-2.10.0-1-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torch-2.10.0-12-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torch-2.10.0-2-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        ),
        "2.10.0",
    )
    assert chosen.filename == "torch-2.10.0-12-cp311-cp311-manylinux_2_28_x86_64.whl"


def test_other_platforms_releases_projects_and_yanked_files_are_ignored() -> None:
    listed = files(
        "torch-2.10.0-cp311-none-macosx_11_0_arm64.whl",
        "torch-2.10.0-cp311-cp311-win_amd64.whl",
        "torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        "torch-2.10.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.10.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torchvision-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.10.0.tar.gz",
        "torch-2.10.0-cp310-cp310-manylinux_2_28_x86_64.whl",
        yanked=("torch-2.10.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",),
    )
    assert choose_wheel(listed, "2.10.0").filename == (
        "torch-2.10.0-cp310-cp310-manylinux_2_28_x86_64.whl"
    )
    assert choose_wheel(listed, "2.10.0", "aarch64").filename == (
        "torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl"
    )


def test_no_such_release_names_the_newest_the_index_has() -> None:
    listed = files(
        *(
            f"torch-{v}-cp311-cp311-manylinux_2_28_x86_64.whl"
            for v in ("1.13.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0+cpu", "2.2.0")
        )
    )
    with pytest.raises(UsageError) as caught:
        choose_wheel(listed, "2.12.0")
    assert caught.value.message == (
        "the index lists no Linux x86_64 wheel of torch 2.12.0 "
        "(its newest: 2.8.0, 2.9.0, 2.9.1, 2.10.0, 2.11.0)"
    )
    assert "--torch" in str(caught.value.hint) and "--index-url" in str(caught.value.hint)
    with pytest.raises(UsageError, match=r"wheel of torch 2\.10\.0$"):
        choose_wheel(files("numpy-2.0.0-cp311-cp311-manylinux_2_28_x86_64.whl"), "2.10.0")
