"""`fdl libtorch download` end to end against a real HTTP server on 127.0.0.1.

The server is a mirror of download.pytorch.org (same URL paths, from fdl's data) serving
official-looking zips built here; faults are injected per request: dropped connections,
5xx, truncated bodies, wrong content, 404, and malicious archives.
"""

from __future__ import annotations

import hashlib
import io
import json
import stat
import threading
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fdl.compat import default_torch_version, libtorch_url
from fdl.libtorch import plan_download, run_download, select_variant
from fdl.net import RetryPolicy
from fdl.paths import Context
from tests.support import faulty_http
from tests.support.faulty_http import Drop, FaultyServer, Status, Truncate, WrongContent
from tests.support.libtorch_trees import libtorch_zip

faulty_server = faulty_http.faulty_server  # the fixture

TORCH = default_torch_version()  # what `fdl libtorch download` gets without --torch


def url_path(variant: str, torch: str = TORCH) -> str:
    return urlsplit(libtorch_url(torch, variant)).path


@pytest.fixture
def env(tmp_path: Path, faulty_server: FaultyServer) -> dict[str, str]:
    (tmp_path / "work").mkdir()
    return {
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_LIBTORCH_MIRROR": faulty_server.url(""),
    }


@pytest.fixture
def fdl(run_fdl, tmp_path: Path, env):
    def invoke(*args: str):
        return run_fdl(["-q", *args], cwd=tmp_path / "work", env=env)

    return invoke


def home(tmp_path: Path) -> Path:
    return tmp_path / "home" / "libtorch"


def assert_nothing_installed(tmp_path: Path) -> None:
    precompiled = home(tmp_path) / "precompiled"
    leftovers = sorted(p.name for p in precompiled.iterdir()) if precompiled.is_dir() else []
    assert leftovers == [], f"half-installed files: {leftovers}"
    active = home(tmp_path) / ".active"
    assert not active.exists() or active.read_text() == ""


def test_download_installs_records_sha256_and_activates(fdl, faulty_server, tmp_path) -> None:
    data = libtorch_zip(f"{TORCH}+cpu")
    faulty_server.add(url_path("cpu"), data)
    result = fdl("libtorch", "download", "--cpu", "--json")
    assert result.exit_code == 0, result.stderr
    installed = json.loads(result.stdout)
    variant = home(tmp_path) / "precompiled" / "cpu"
    assert installed["path"] == str(variant) and installed["activated"] is True
    assert (variant / "lib" / "libtorch.so").is_file()
    info = json.loads((variant / "variant.json").read_text())
    assert info["source"]["kind"] == "archive"  # the source's name (fdl 0.5: "download")
    assert info["source"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert info["source"]["url"] == libtorch_url(TORCH, "cpu")
    assert info["source"]["fetched_from"] == faulty_server.url(url_path("cpu"))
    assert info["torch"] == TORCH and info["abi"] == "cxx11"
    assert (home(tmp_path) / ".active").read_text() == "precompiled/cpu\n"
    assert "cuda=none" in (variant / ".arch").read_text()
    # the CDN rejects urllib's User-Agent: a real one is sent
    agent = faulty_server.requests_to(url_path("cpu"))[0].headers.get("user-agent", "")
    assert agent.startswith("fdl/")
    assert list((tmp_path / "cache" / "libtorch").glob("*.zip")) == []
    # a second run finds it installed and fetches nothing
    faulty_server.clear_log()
    again = fdl("libtorch", "download", "--cpu")
    assert again.exit_code == 0
    assert faulty_server.requests_to(url_path("cpu")) == []


def test_dropped_connection_is_resumed(fdl, faulty_server, tmp_path) -> None:
    data = libtorch_zip(f"{TORCH}+cu130", cubins=[75, 120], cuda_needed=())
    path = url_path("cu130")
    faulty_server.add(path, data)
    faulty_server.script(path, Drop(after=len(data) // 2), None)
    result = fdl("libtorch", "download", "--cuda", "13.0")
    assert result.exit_code == 0, result.stderr
    requests = faulty_server.requests_to(path)
    assert len(requests) == 2 and requests[1].range is not None
    assert faulty_server.sent(path) < len(data) * 1.5  # resumed, not restarted
    zipped = zipfile.ZipFile(io.BytesIO(data))
    variant = home(tmp_path) / "precompiled" / "cu130"
    for name in ("lib/libtorch_cuda.so", "lib/libtorch.so", "build-version"):
        assert (variant / name).read_bytes() == zipped.read(f"libtorch/{name}")
    info = json.loads((variant / "variant.json").read_text())
    assert info["archs_found"]["cubin"] == ["sm_75", "sm_120"]
    assert info["source"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_server_error_then_success(fdl, faulty_server, tmp_path) -> None:
    path = url_path("cpu")
    faulty_server.add(path, libtorch_zip(f"{TORCH}+cpu"))
    faulty_server.script(path, Status(503), None)
    result = fdl("libtorch", "download", "--cpu")
    assert result.exit_code == 0, result.stderr
    assert [r.status for r in faulty_server.requests_to(path)] == [503, 200]


def test_truncated_body_is_completed(fdl, faulty_server, tmp_path) -> None:
    data = libtorch_zip(f"{TORCH}+cpu")
    path = url_path("cpu")
    faulty_server.add(path, data)
    faulty_server.script(path, Truncate(send=len(data) // 3), None)
    result = fdl("libtorch", "download", "--cpu")
    assert result.exit_code == 0, result.stderr
    info = json.loads((home(tmp_path) / "precompiled/cpu/variant.json").read_text())
    assert info["source"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_wrong_content_is_refused_and_nothing_installed(fdl, faulty_server, tmp_path) -> None:
    path = url_path("cpu")
    faulty_server.add(path, libtorch_zip(f"{TORCH}+cpu"))
    faulty_server.always(path, WrongContent())
    result = fdl("libtorch", "download", "--cpu")
    assert result.exit_code != 0
    assert "zip" in result.stderr.lower()
    assert_nothing_installed(tmp_path)
    assert list((tmp_path / "cache" / "libtorch").glob("*.zip")) == []


def test_other_build_version_is_refused(fdl, faulty_server, tmp_path) -> None:
    faulty_server.add(url_path("cpu"), libtorch_zip("2.13.0+cpu"))
    result = fdl("libtorch", "download", "--cpu")
    assert result.exit_code == 4
    assert f"holds libtorch 2.13.0+cpu, expected {TORCH}+cpu" in result.stderr
    assert_nothing_installed(tmp_path)


def test_not_found_is_a_clear_network_error(fdl, faulty_server, tmp_path) -> None:
    result = fdl("libtorch", "download", "--cpu")
    assert result.exit_code == 5
    assert "404" in result.stderr or "not found" in result.stderr.lower()
    assert "--from-wheel" in result.stderr
    assert_nothing_installed(tmp_path)


def evil_zip(kind: str) -> bytes:
    """An official-looking zip with one hostile member."""
    good = zipfile.ZipFile(io.BytesIO(libtorch_zip(f"{TORCH}+cpu")))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for info in good.infolist():
            archive.writestr(info, good.read(info))
        if kind == "slip":
            archive.writestr("libtorch/../../../escaped.txt", b"pwned")
        elif kind == "absolute":
            archive.writestr("/tmp/fdl-escaped-absolute.txt", b"pwned")
        elif kind == "symlink":
            link = zipfile.ZipInfo("libtorch/lib/escape")
            link.create_system = 3
            link.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(link, "../../../../..")
            archive.writestr("libtorch/lib/escape/escaped.txt", b"pwned")
        elif kind == "deep":
            archive.writestr("libtorch/" + "d/" * 2000 + "escaped.txt", b"deep")
        elif kind == "long":
            archive.writestr("libtorch/" + ("x" * 200 + "/") * 25 + "escaped.txt", b"long")
        elif kind == "encrypted":
            archive.writestr("libtorch/lib/secret.so", b"ciphertext")
        elif kind == "not-utf8":
            archive.writestr("libtorch/lib/\u00e9scaped.txt", b"x")
    data = buffer.getvalue()
    if kind == "not-utf8":  # the UTF-8 flag stays, the name's bytes are no longer UTF-8
        data = data.replace("\u00e9".encode(), b"\xff\xfe")
    if kind == "encrypted":  # set the "encrypted" flag bit in both headers of the member
        data = _set_flag(data, b"PK\x03\x04", 6, b"libtorch/lib/secret.so", 30)
        data = _set_flag(data, b"PK\x01\x02", 8, b"libtorch/lib/secret.so", 46)
    return data


def _set_flag(data: bytes, signature: bytes, offset: int, name: bytes, name_at: int) -> bytes:
    start = 0
    while (start := data.find(signature, start)) >= 0:
        if data[start + name_at : start + name_at + len(name)] == name:
            flags = int.from_bytes(data[start + offset : start + offset + 2], "little") | 1
            return data[: start + offset] + flags.to_bytes(2, "little") + data[start + offset + 2 :]
        start += 1
    raise AssertionError(f"no {signature!r} header for {name!r}")


@pytest.mark.parametrize(
    "kind", ["slip", "absolute", "symlink", "deep", "long", "encrypted", "not-utf8"]
)
def test_malicious_archives_are_refused(fdl, faulty_server, tmp_path, kind) -> None:
    faulty_server.add(url_path("cpu"), evil_zip(kind))
    before = {p for p in tmp_path.rglob("*")}
    result = fdl("libtorch", "download", "--cpu")
    assert result.exit_code != 0
    assert result.exit_code in (1, 2, 4), result.output  # documented, never 70
    assert (
        "refus" in result.stderr.lower()
        or "unsafe" in result.stderr.lower()
        or "outside" in result.stderr.lower()
        or "encrypted" in result.stderr.lower()
        or "utf-8" in result.stderr.lower()
    ), result.stderr
    assert_nothing_installed(tmp_path)
    created = {p for p in tmp_path.rglob("*")} - before
    assert not [p for p in created if p.name.startswith("escaped")]
    assert not Path("/tmp/fdl-escaped-absolute.txt").exists()
    assert list((tmp_path / "cache" / "libtorch").glob("*.zip")) == []


def test_concurrent_downloads_install_once(faulty_server, tmp_path) -> None:
    data = libtorch_zip(f"{TORCH}+cpu")
    faulty_server.add(url_path("cpu"), data)
    context = Context(tmp_path / "root", project=True)
    selection = select_variant([], cpu=True)
    plan = plan_download(selection, context, tmp_path / "cache", mirror=faulty_server.url(""))
    results, errors = [], []
    fast = {"retry": RetryPolicy(attempts=2, base_delay=0.01)}

    def run() -> None:
        try:
            results.append(run_download(plan, context, transfer=fast))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(r.installed for r in results) == [False, True]
    assert len(faulty_server.requests_to(url_path("cpu"))) == 1
    assert (context.libtorch_dir / "precompiled/cpu/lib/libtorch.so").is_file()


def test_setup_yes_on_a_cpu_machine_installs_and_activates(
    run_fdl, faulty_server, tmp_path, env
) -> None:
    faulty_server.add(url_path("cpu"), libtorch_zip(f"{TORCH}+cpu"))
    clean = {**env, "PATH": "/usr/bin:/bin"}  # no nvidia-smi: a CPU machine
    result = run_fdl(["setup", "--yes"], cwd=tmp_path / "work", env=clean)
    assert result.exit_code == 0, result.stderr
    assert "plan: download" in result.stdout
    assert (home(tmp_path) / ".active").read_text() == "precompiled/cpu\n"


def test_a_run_killed_after_the_download_reuses_the_verified_archive(
    fdl, faulty_server, tmp_path, monkeypatch
) -> None:
    faulty_server.add(url_path("cpu"), libtorch_zip(f"{TORCH}+cpu"))
    from fdl.libtorch.sources import _archive as download_module

    real_extract = download_module.safe_extract_zip

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the user's Ctrl-C (or a kill) while extracting

    monkeypatch.setattr(download_module, "safe_extract_zip", killed)
    first = fdl("libtorch", "download", "--cpu")
    assert first.exit_code == 130, first.output
    assert_nothing_installed(tmp_path)
    assert len(faulty_server.requests_to(url_path("cpu"))) == 1

    monkeypatch.setattr(download_module, "safe_extract_zip", real_extract)
    faulty_server.clear_log()
    again = fdl("libtorch", "download", "--cpu", "--json")
    assert again.exit_code == 0, again.output
    assert faulty_server.requests_to(url_path("cpu")) == [], "downloaded the archive again"
    assert json.loads(again.stdout)["installed"] is True
    left = [p.name for p in (tmp_path / "cache" / "libtorch").iterdir()]
    # only the locks and the cache's tag stay (`fdl cache clean` deletes only tagged caches)
    assert [name for name in left if not name.endswith(".lock") and name != "CACHEDIR.TAG"] == []
