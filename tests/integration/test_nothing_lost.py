"""Nothing lost: fdl replaces or deletes only what it made.

Each test puts a decoy where a careless install would write (the user's data directory, the
project itself, the unzipped official archive) and checks that fdl refuses, with the fix, and
that every decoy byte is still there. Downloads run against a real HTTP server on 127.0.0.1;
a refusal must come before any byte is fetched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fdl.compat import libtorch_url
from tests.support import faulty_http
from tests.support.faulty_http import FaultyServer
from tests.support.libtorch_trees import libtorch_zip, make_tree

faulty_server = faulty_http.faulty_server  # the fixture

TORCH = "2.14.1"
CPU_PATH = urlsplit(libtorch_url(TORCH, "cpu")).path


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file (content) and directory (marker) under ``root``, by relative path."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        found[key] = path.read_bytes() if path.is_file() else "dir"
    return found


def decoy(directory: Path) -> Path:
    """A directory of the user's that is not libtorch."""
    (directory / "src").mkdir(parents=True)
    (directory / "notes.txt").write_text("three weeks of results\n")
    (directory / "src" / "main.rs").write_text("fn main() {}\n")
    return directory


@pytest.fixture
def server(faulty_server: FaultyServer) -> FaultyServer:
    faulty_server.add(CPU_PATH, libtorch_zip(f"{TORCH}+cpu"))
    return faulty_server


@pytest.fixture
def fdl(run_fdl, tmp_path: Path, server: FaultyServer):
    env = {
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_LIBTORCH_MIRROR": server.url(""),
    }

    def invoke(*args: str, cwd: Path):
        return run_fdl(["-q", *args], cwd=cwd, env=env)

    return invoke


def download(fdl, cwd: Path, path: str, *extra: str):
    return fdl("libtorch", "download", "--cpu", "--torch", TORCH, "--path", path, *extra, cwd=cwd)


def test_download_refuses_a_directory_of_the_users_before_fetching(fdl, server, tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    mydata = decoy(tmp_path / "mydata")
    before = snapshot(mydata)
    result = download(fdl, work, "../mydata")
    assert result.exit_code == 2, result.output
    assert "is not a libtorch variant fdl installed" in result.stderr
    assert "notes.txt" in result.stderr and "--force" in result.stderr
    assert snapshot(mydata) == before
    assert server.requests_to(CPU_PATH) == [], "refused only after downloading"
    assert not list(tmp_path.glob(".mydata.*")), "staging left behind"


@pytest.mark.parametrize("force", [False, True])
def test_download_never_replaces_the_project_itself(fdl, server, tmp_path, force) -> None:
    project = decoy(tmp_path / "proj")
    (project / "fdl.yml").write_text("commands:\n  train:\n    run: echo hi\n")
    before = snapshot(project)
    flags = ["--force"] if force else []
    for path in (".", str(tmp_path)):  # the project, and a directory that contains it
        result = download(fdl, project, path, *flags)
        assert result.exit_code == 2, result.output
        assert "fdl never replaces it, not even with --force" in result.stderr
        assert snapshot(project) == before
    assert server.requests_to(CPU_PATH) == []


def test_download_into_a_new_or_empty_directory_and_replace_with_force(
    fdl, server, tmp_path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "empty").mkdir()
    result = download(fdl, work, "../empty", "--json")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "empty" / "lib" / "libtorch.so").is_file()
    # fdl made it: a forced re-download replaces it without complaint
    again = download(fdl, work, "../empty", "--force")
    assert again.exit_code == 0, again.output
    # the user's own directory is replaced only when --force says so
    mine = decoy(tmp_path / "mine")
    refused = download(fdl, work, "../mine")
    assert refused.exit_code == 2 and (mine / "notes.txt").is_file()
    forced = download(fdl, work, "../mine", "--force")
    assert forced.exit_code == 0, forced.output
    assert (mine / "lib" / "libtorch.so").is_file() and not (mine / "notes.txt").exists()


@pytest.mark.parametrize("force", [False, True])
def test_a_device_a_fifo_or_a_socket_is_never_replaced(fdl, server, tmp_path, force) -> None:
    """The code before this test, as root, replaced `--path /dev/zero --force` with a
    libtorch tree (the staging directory was made beside it, in /dev). The device here is
    made in the test's directory, so a regression cannot take the machine's."""
    import socket
    import stat

    work = tmp_path / "work"
    work.mkdir()
    targets = [("../fifo", "a FIFO"), ("../sock", "a socket")]
    os.mkfifo(tmp_path / "fifo")
    try:
        os.mknod(tmp_path / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
        targets.append(("../zero", "a device"))
    except PermissionError:  # not root: the FIFO and the socket still count
        pass
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "sock"))
    flags = ["--force"] if force else []
    try:
        for path, kind in targets:
            for dry_run in ([], ["--dry-run"]):
                result = download(fdl, work, path, *flags, *dry_run)
                assert result.exit_code == 2, result.output
                assert f"is {kind}; fdl never replaces it, not even with --force" in result.stderr
                assert not (work / path).resolve().is_dir()
    finally:
        listener.close()
    assert server.requests_to(CPU_PATH) == []


def test_a_top_level_directory_of_the_system_is_not_replaced_even_with_force(fdl, tmp_path) -> None:
    """Only checked, never attempted: the refusal comes before anything is touched."""
    result = download(fdl, tmp_path, "/usr", "--force", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "/usr is a top-level directory of the system (it holds " in result.stderr
    assert "not even with --force" in result.stderr


def test_the_dry_run_refuses_what_the_run_would(fdl, server, tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    mydata = decoy(tmp_path / "mydata")
    refused = download(fdl, work, "../mydata", "--dry-run")
    assert refused.exit_code == 2, refused.output
    assert "is not a libtorch variant fdl installed" in refused.stderr
    forced = download(fdl, work, "../mydata", "--dry-run", "--force")
    assert forced.exit_code == 0, forced.output
    assert (mydata / "notes.txt").is_file() and server.requests_to(CPU_PATH) == []


def test_install_from_dir_of_an_archive_unzipped_in_the_project_root(run_fdl, tmp_path) -> None:
    """`unzip libtorch-*.zip` in the project, then install it: refused, never copied into itself."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "fdl.yml").write_text("commands:\n  train:\n    run: echo hi\n")
    make_tree(project / "libtorch", "2.13.0+cpu")
    before = snapshot(project)
    env = {"FDL_HOME": str(tmp_path / "home")}
    result = run_fdl(["libtorch", "install", "--from-dir", "libtorch"], cwd=project, env=env)
    assert result.exit_code == 2, result.output
    assert "would copy it into itself" in result.stderr
    assert "mv " in result.stderr and "--from-dir" in result.stderr
    assert snapshot(project) == before, "the refused install changed the project"
    # the fix it gives works
    os.rename(project / "libtorch", project / "libtorch-tree")
    fixed = run_fdl(
        ["libtorch", "install", "--from-dir", "libtorch-tree", "--json"], cwd=project, env=env
    )
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["variant"] == "precompiled/libtorch-tree"
    assert (
        project / "libtorch" / "precompiled" / "libtorch-tree" / "lib" / "libtorch.so"
    ).is_file()
    assert (project / "libtorch-tree" / "lib" / "libtorch.so").is_file(), "the original is kept"


def test_install_from_dir_of_a_tree_already_in_place_adopts_it(run_fdl, tmp_path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "fdl.yml").write_text("commands: {}\n")
    tree = make_tree(project / "libtorch" / "precompiled" / "mine", "2.13.0+cpu")
    files = snapshot(tree)
    result = run_fdl(
        ["libtorch", "install", "--from-dir", str(tree), "--json"],
        cwd=project,
        env={"FDL_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["variant"] == "precompiled/mine"
    after = snapshot(tree)
    assert {k: v for k, v in after.items() if k in files} == files
    assert "variant.json" in after
    assert (project / "libtorch" / ".active").read_text() == "precompiled/mine\n"


FORCED_X = ("--name", "x", "--force")


def test_install_from_dir_over_a_directory_fdl_did_not_make(run_fdl, tmp_path) -> None:
    home = tmp_path / "home"
    mine = decoy(home / "libtorch" / "precompiled" / "x")
    before = snapshot(mine)
    tree = make_tree(tmp_path / "tree", "2.13.0+cpu")
    env = {"FDL_HOME": str(home)}
    work = tmp_path
    refused = run_fdl(
        ["libtorch", "install", "--from-dir", str(tree), "--name", "x"], cwd=work, env=env
    )
    assert refused.exit_code == 2 and "already installed" in refused.stderr
    assert snapshot(mine) == before
    # --force replaces only what is not protected: a real libtorch tree kept inside the
    # target is the tree being installed, and replacing the target would delete it
    make_tree(mine / "src" / "libtorch", "2.13.0+cpu")
    before = snapshot(mine)
    inside = run_fdl(
        ["libtorch", "install", "--from-dir", str(mine / "src" / "libtorch"), *FORCED_X],
        cwd=work,
        env=env,
    )
    assert inside.exit_code == 2, inside.output
    assert "the tree being installed" in inside.stderr
    assert snapshot(mine) == before


def test_remove_of_a_linked_variant_removes_the_link_only(run_fdl, tmp_path) -> None:
    home = tmp_path / "home"
    elsewhere = make_tree(tmp_path / "shared" / "libtorch-2.13", "2.13.0+cpu")
    before = snapshot(elsewhere)
    (home / "libtorch" / "precompiled").mkdir(parents=True)
    (home / "libtorch" / "precompiled" / "shared").symlink_to(elsewhere)
    result = run_fdl(
        ["libtorch", "remove", "precompiled/shared", "--yes"],
        cwd=tmp_path,
        env={"FDL_HOME": str(home)},
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (home / "libtorch" / "precompiled").iterdir()) == []
    assert snapshot(elsewhere) == before


def test_remove_refuses_a_directory_of_the_users_in_the_layout(run_fdl, tmp_path) -> None:
    """`libtorch remove precompiled/notes --yes` deleted a directory fdl never listed as a
    variant (no lib/); its dry-run said it would."""
    home = tmp_path / "home"
    mine = decoy(home / "libtorch" / "precompiled" / "notes")
    before = snapshot(mine)
    env = {"FDL_HOME": str(home)}
    for extra in (["--dry-run"], ["--yes"]):
        result = run_fdl(["libtorch", "remove", "precompiled/notes", *extra], cwd=tmp_path, env=env)
        assert result.exit_code == 2, result.output
        assert "is not a libtorch variant (no lib/; it holds notes.txt, src)" in result.stderr
        assert "move it out of" in result.stderr
    for command in (["activate", "precompiled/notes"], ["info", "precompiled/notes"]):
        assert run_fdl(["libtorch", *command], cwd=tmp_path, env=env).exit_code == 2
    assert snapshot(mine) == before
    make_tree(home / "libtorch" / "precompiled" / "cpu", "2.13.0+cpu")
    removed = run_fdl(["libtorch", "remove", "precompiled/cpu", "--yes"], cwd=tmp_path, env=env)
    assert removed.exit_code == 0, removed.output
    assert not (home / "libtorch" / "precompiled" / "cpu").exists()
