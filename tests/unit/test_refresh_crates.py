"""``python -m fdl.refresh`` finds the floDl and tch releases Rust's registry has that
frameworks.yaml lacks (a fake sparse index on 127.0.0.1: yanked and pre-releases
skipped), reads each from its crates and proposes a row with its source; a crate that
does not state its torch, or is hostile, is reported, not written."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator

import pytest
import yaml

from fdl._assets import data_dir
from fdl.net import read_range
from fdl.refresh._crates import index_path, refresh_frameworks
from tests.support.fake_crates import TORCH_SYS_BUILD, crate, flodl_files, serve_registry
from tests.support.faulty_http import FaultyServer

TODAY = "2026-12-07"


def _flodl(version: str, torch: str) -> dict[tuple[str, str], bytes]:
    return {
        (name, version): crate(name, version, files)
        for name, files in flodl_files(torch=torch, cxx=17).items()
    }


def _climbing(version: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(f"torch-sys-{version}/../../build.rs")
        archive.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


@pytest.fixture
def index() -> Iterator[tuple[FaultyServer, str]]:
    published = {
        **_flodl("0.8.0", "2.10.0"),
        **_flodl("0.9.0", "2.11.0"),
        **_flodl("0.9.1", "2.12.0"),  # yanked below
        ("flodl", "0.8.0"): crate("flodl", "0.8.0", {}),
        ("flodl", "0.9.0"): crate("flodl", "0.9.0", {}),
        ("flodl", "0.9.1"): crate("flodl", "0.9.1", {}),
        ("tch", "0.26.0"): crate("tch", "0.26.0", {}),
        ("tch", "0.27.0"): crate("tch", "0.27.0", {}),
        ("tch", "0.28.0"): crate("tch", "0.28.0", {}),
        ("torch-sys", "0.26.0"): crate("torch-sys", "0.26.0", {}),
        ("torch-sys", "0.27.0"): crate(
            "torch-sys", "0.27.0", {"build.rs": TORCH_SYS_BUILD.format(torch="2.13.0", cxx=17)}
        ),
        ("torch-sys", "0.28.0"): _climbing("0.28.0"),
    }
    with FaultyServer() as server:
        url = serve_registry(server, published, yanked=frozenset({("flodl", "0.9.1")}))
        # a pre-release and a line that is no entry: skipped
        path = f"/index/{index_path('flodl')}"
        extra = b'{"name":"flodl","vers":"1.0.0-rc.1","yanked":false}\nnot json\n'
        server.add(path, _served(server, path) + extra)
        yield server, url.removeprefix("sparse+")


def _served(server: FaultyServer, path: str) -> bytes:
    data, _ = read_range(server.url(path), 0, None)
    return data


def test_new_releases_become_rows_with_their_sources(index) -> None:
    server, url = index
    text = (data_dir() / "compat" / "frameworks.yaml").read_text()
    done = refresh_frameworks(read_range, text, index=url, today=TODAY)
    found = {(f.framework, f.version): f for f in done.findings}
    assert set(found) == {("flodl", "0.9.0"), ("tch", "0.27.0"), ("tch", "0.28.0")}
    flodl = found[("flodl", "0.9.0")]
    assert (flodl.torch, flodl.cxx_standard, flodl.error) == ("2.11.0", 17, "")
    assert flodl.source.startswith("crates flodl-cli 0.9.0 and flodl-sys 0.9.0 (Rust's registry")
    assert 'flodl-cli src/libtorch/download.rs:3 LIBTORCH_VERSION "2.11.0"' in flodl.source
    assert "'..' in the path" in found[("tch", "0.28.0")].error
    table = yaml.safe_load(done.after)["frameworks"]
    assert table["flodl"]["releases"][-1] == {
        "versions": ["0.9.0"],
        "torch": "2.11.0",
        "cxx_standard": 17,
        "source": flodl.source,
    }
    assert table["tch"]["releases"][-1]["versions"] == ["0.27.0"]
    assert table["tch"]["releases"][-1]["torch"] == "2.13.0"
    assert yaml.safe_load(done.after)["headers"] == yaml.safe_load(text)["headers"]
    assert done.after.count("\n") == text.count("\n") + 8  # two rows of 4 lines, nothing else
    downloads = sorted(r.path for r in server.log if r.path.startswith("/dl/"))
    assert "/dl/flodl-cli/0.9.1/download" not in downloads  # yanked: not read
    assert "/dl/flodl-cli/0.8.0/download" not in downloads  # in the table: not read


def test_the_tool_reads_the_index_it_is_given_and_a_dead_one_is_exit_5(
    index, tmp_path, monkeypatch, capsys
) -> None:
    import shutil

    import fdl._assets
    from fdl.refresh.__main__ import _crates

    _, url = index
    shutil.copytree(data_dir() / "compat", tmp_path / "compat")
    monkeypatch.setattr(fdl._assets, "data_dir", lambda: tmp_path)

    class Args:
        no_crates = False
        crates_index = url

    done, failed = _crates(Args(), tmp_path / "compat", TODAY)
    assert failed == 0 and done is not None
    assert {f.version for f in done.findings if not f.error} == {"0.9.0", "0.27.0"}
    Args.crates_index = "http://127.0.0.1:9/index"
    none, failed = _crates(Args(), tmp_path / "compat", TODAY)
    assert none is None and failed == 5
    assert (
        "cannot read floDl and tch releases from http://127.0.0.1:9/index"
        in capsys.readouterr().err
    )


def test_index_paths_follow_rusts_layout() -> None:
    assert [index_path(n) for n in ("a", "ab", "tch", "flodl", "torch-sys")] == [
        "1/a",
        "2/ab",
        "3/t/tch",
        "fl/od/flodl",
        "to/rc/torch-sys",
    ]
