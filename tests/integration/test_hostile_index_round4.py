"""Issue 42 (round 4): a hostile package index on 127.0.0.1 against the CPU view
(`fdl libtorch install --from-wheel --cpu`): index text never becomes code in the files the
view generates, credentials in the index URL never leave with what fdl prints or records."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.support import faulty_http
from tests.support.cpu_view_wheels import (
    TORCH,
    PackageIndex,
    Wheel,
    torch_members,
    wheel_bytes,
)
from tests.support.faulty_http import FaultyServer

faulty_server = faulty_http.faulty_server  # the fixture

Fdl = Callable[..., Result]
PAYLOAD = 'execute_process(COMMAND touch "${CMAKE_CURRENT_LIST_DIR}/pwned")'


@pytest.fixture
def fdl(run_fdl, tmp_path: Path) -> Fdl:
    (tmp_path / "work").mkdir()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        environ = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
        return run_fdl(["-q", *args], cwd=tmp_path / "work", env={**environ, **(env or {})})

    return invoke


def install(fdl: Fdl, index_url: str, *extra: str) -> Result:
    args = ["libtorch", "install", "--from-wheel", "--cpu", "--torch", TORCH]
    return fdl(*args, "--index-url", index_url, *extra)


def generated(tmp_path: Path) -> list[Path]:
    home = tmp_path / "home"
    return [p for p in home.rglob("*") if p.is_file()] if home.is_dir() else []


def refused(result: Result, code: int, *words: str) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    assert "\n  fix: " in result.stderr


def served_as(index: PackageIndex, filename: str, path_name: str) -> None:
    """The page lists ``filename`` at ``../../files/<path_name>`` (a mirror's page may name
    a file anything; its URL is what is fetched)."""
    files = []
    for wheel in index.projects["torch"]:
        name = path_name if wheel.filename == filename else wheel.filename
        index.server.add(index.file_path(name), wheel.data)
        files.append(
            {
                "filename": wheel.filename,
                "url": f"../../files/{name}",
                "hashes": {"sha256": wheel.sha256},
                "size": len(wheel.data),
            }
        )
    page = {"meta": {"api-version": "1.1"}, "name": "torch", "files": files}
    kind = "application/vnd.pypi.simple.v1+json"
    index.server.add(index.page_path("torch"), json.dumps(page).encode(), content_type=kind)


# --- point 1: index text becomes code --------------------------------------------------


@pytest.mark.parametrize(
    "local",
    [
        f"cu128\n{PAYLOAD}\n#",  # a line break out of TorchConfig.cmake's comment line
        "cu128*/INPUT(/etc/passwd)/*",  # out of the linker script's comment
        'cu128")${PWNED}',  # out of a quoted CMake argument
    ],
    ids=["cmake-line", "linker-comment", "cmake-quote"],
)
def test_a_wheel_version_that_carries_code_is_refused_naming_the_index(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path, local: str
) -> None:
    version = f"{TORCH}+{local}"
    filename = f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    index = PackageIndex(faulty_server)
    index.add_torch(wheel_bytes(torch_members()), filename=filename)
    served_as(index, filename, "torch-x-cp311-cp311-manylinux_2_28_x86_64.whl")
    result = install(fdl, index.url)
    refused(result, 5, "the wheel torch-2.10.0+cu128", index.url, "its version", "--index-url")
    assert "\n" + PAYLOAD not in result.stderr  # shown escaped, never as a line of its own
    assert [p for p in generated(tmp_path) if p.suffix == ".cmake" or p.name == "libtorch.so"] == []
    assert not list(tmp_path.rglob("pwned"))


@pytest.mark.parametrize("cuda", ["12.8*/INPUT(/etc/passwd)/*", "12.8 ${PWNED}", "1" * 5000])
def test_version_py_s_cuda_that_carries_code_is_refused(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path, cuda: str
) -> None:
    index = PackageIndex(faulty_server)
    index.add_torch(wheel_bytes(torch_members(cuda=cuda)))
    refused(install(fdl, index.url), 5, "version.py's cuda", index.url, "--index-url")
    assert not list(tmp_path.rglob("TorchConfig.cmake")) and not list(tmp_path.rglob("libtorch.so"))


def test_an_honest_index_still_installs_and_its_cmake_holds_the_build(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path
) -> None:
    index = PackageIndex(faulty_server)
    index.add_torch()
    result = install(fdl, index.url, "--json")
    assert result.exit_code == 0, result.output
    tree = Path(json.loads(result.stdout)["path"])
    config = (tree / "share/cmake/Torch/TorchConfig.cmake").read_text()
    assert f"torch {TORCH}+cu128 wheel" in config
    assert (tree / "build-version").read_text() == f"{TORCH}+cu128\n"


def test_an_unused_hostile_file_name_on_the_page_does_not_stop_the_install(
    fdl: Fdl, faulty_server: FaultyServer
) -> None:
    index = PackageIndex(faulty_server)
    index.add_torch()
    bad = f"torch-{TORCH}\n{PAYLOAD}-cp311-cp311-manylinux_2_28_aarch64.whl"
    index.add("torch", Wheel(bad, b"never read"))
    assert install(fdl, index.url).exit_code == 0


# --- point 2: index credentials ----------------------------------------------------------

TOKEN = "s3cr3t-t0ken-4242"


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://fdl-user:{TOKEN}@", 1)


def sent_credentials(server: FaultyServer, host: str) -> list[bool]:
    """For each request the server saw for ``host``: whether it carried credentials."""
    seen = [{k.lower(): v for k, v in entry.headers.items()} for entry in server.log]
    return ["authorization" in h for h in seen if h.get("host", "").split(":")[0] == host]


def test_index_credentials_go_to_the_index_and_nowhere_else(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path
) -> None:
    index = PackageIndex(faulty_server)
    index.add_torch()
    result = install(fdl, with_credentials(index.url), "--json")
    assert result.exit_code == 0, result.output
    assert sent_credentials(faulty_server, "127.0.0.1")  # the index got them, on every request
    assert all(sent_credentials(faulty_server, "127.0.0.1"))
    recorded = (tmp_path / "home/libtorch/precompiled/cpu/variant.json").read_text()
    assert "127.0.0.1" in recorded and "***@127.0.0.1" in recorded
    shown = fdl("libtorch", "info", "precompiled/cpu", "--json")
    assert shown.exit_code == 0 and "***@127.0.0.1" in shown.stdout
    for text in (result.output, recorded, shown.output, fdl("libtorch", "info").output):
        assert TOKEN not in text and "fdl-user" not in text


def test_an_index_error_does_not_print_the_token(fdl: Fdl, faulty_server: FaultyServer) -> None:
    result = install(fdl, with_credentials(faulty_server.url("/simple")))
    refused(result, 5, "***@127.0.0.1")
    assert TOKEN not in result.output


def test_credentials_do_not_follow_a_link_or_a_redirect_to_another_host(
    fdl: Fdl, faulty_server: FaultyServer
) -> None:
    from tests.support.faulty_http import Status

    index = PackageIndex(faulty_server)
    index.add_torch()
    elsewhere = faulty_server.url("/simple").replace("127.0.0.1", "localhost")
    # the index's page is redirected to another host, which serves it
    faulty_server.script(index.page_path("torch"), Status(302, location=f"{elsewhere}/torch/"))
    result = install(fdl, with_credentials(index.url))
    assert result.exit_code == 0, result.output
    assert sent_credentials(faulty_server, "localhost") != []
    assert not any(sent_credentials(faulty_server, "localhost"))
    assert TOKEN not in result.output


# --- point 3: escape sequences and line breaks from outside never reach the terminal raw --

TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
LINK = "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07"  # a hyperlink
CLEAR = "\x1b[2J\x1b[H"  # clears the screen


def test_escape_sequences_in_index_file_names_are_shown_escaped(
    fdl: Fdl, faulty_server: FaultyServer
) -> None:
    index = PackageIndex(faulty_server)
    index.add_torch()
    for hostile in (TITLE, LINK, CLEAR, "\r\u202e"):
        name = f"torch-2.9.9{hostile}-cp311-cp311-manylinux_2_28_x86_64.whl"
        index.add("torch", Wheel(name, b"never read"))
    result = fdl(
        "libtorch",
        "install",
        "--from-wheel",
        "--cpu",
        "--torch",
        "2.11.0",
        "--index-url",
        index.url,
    )
    refused(result, 2, "no Linux x86_64 wheel of torch 2.11.0", "its newest")
    shown = result.stderr
    assert "its newest: 2.9.1, 2.10.0)" in shown  # what is no version is not named
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\r", "\u202e"):
        assert raw not in shown, (raw, shown)
