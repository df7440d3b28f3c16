"""fdl's caches: listed with their size, cleaned by name, nothing else touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdl.errors import UsageError
from fdl.libtorch import clean_caches, list_caches
from fdl.paths import CACHE_TAG, Context, own_cache_dir
from tests.support.fakes import FakeEngine


def test_list_and_clean_only_fdls_caches(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    own_cache_dir(cache / "wheels")
    (cache / "wheels" / "torch.whl").write_bytes(b"x" * 5000)
    (cache / "mine.txt").write_text("not a cache of fdl's\n")
    context = Context(tmp_path / "project", project=True)
    (own_cache_dir(context.libtorch_dir / ".build-cache") / "venv").mkdir()
    (context.libtorch_dir / "precompiled" / "cpu" / "lib").mkdir(parents=True)
    engine = FakeEngine()
    engine.add_image("fdl-libtorch:proj-precompiled-cpu", size=1000)
    engine.add_image("fdl-libtorch-builder:sm120-abc", size=2000)
    engine.add_image("debian:bookworm", size=99)
    entries = {
        e.name: e for e in list_caches(context, {"FDL_CACHE_DIR": str(cache)}, engine=engine)
    }
    assert entries["wheels"].size >= 5000 and entries["downloads"].size == 0
    assert entries["images"].images == (
        "fdl-libtorch-builder:sm120-abc",
        "fdl-libtorch:proj-precompiled-cpu",
    )
    assert entries["images"].size == 3000
    removed = clean_caches(list(entries.values()), ["wheels", "images"], engine=engine)
    assert [e.name for e in removed] == ["wheels", "images"]
    assert not (cache / "wheels").exists() and (cache / "mine.txt").is_file()
    assert (context.libtorch_dir / ".build-cache").is_dir()  # not asked for
    assert (context.libtorch_dir / "precompiled" / "cpu" / "lib").is_dir()  # never a cache
    assert engine.image_exists("debian:bookworm")
    with pytest.raises(UsageError, match="no cache called 'variants'"):
        clean_caches(list(entries.values()), ["variants"])


def test_the_cli_asks_or_needs_yes_and_has_a_dry_run(run_fdl, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    own_cache_dir(cache / "wheels")
    (cache / "wheels" / "torch.whl").write_bytes(b"x" * 4096)
    env = {"FDL_CACHE_DIR": str(cache), "FDL_HOME": str(tmp_path / "home")}
    dry = run_fdl(["cache", "clean", "wheels", "--dry-run"], cwd=tmp_path, env=env)
    assert dry.exit_code == 0 and "[dry-run] would delete wheels" in dry.stdout
    asked = run_fdl(["cache", "clean", "wheels"], cwd=tmp_path, env=env)
    assert asked.exit_code == 2 and "--yes" in asked.stderr
    assert (cache / "wheels" / "torch.whl").is_file()
    done = run_fdl(["cache", "clean", "wheels", "--yes"], cwd=tmp_path, env=env)
    assert done.exit_code == 0 and "freed" in done.stderr
    assert not (cache / "wheels").exists()
    bad = run_fdl(["cache", "clean", "everything"], cwd=tmp_path, env=env)
    assert bad.exit_code == 2 and "no cache called 'everything'" in bad.stderr


def test_a_directory_fdl_did_not_make_is_never_cleaned(run_fdl, tmp_path: Path) -> None:
    """FDL_CACHE_DIR pointed at a home directory: `fdl cache clean --yes` deleted its
    libtorch/ and wheels/ (the user's own), and the dry-run said it would."""
    home = tmp_path / "me"
    (home / "libtorch").mkdir(parents=True)
    (home / "libtorch" / "notes.txt").write_text("three weeks of results\n")
    own_cache_dir(home / "wheels")
    (home / "wheels" / "torch.whl").write_bytes(b"x" * 4096)
    (home / "smoke").mkdir()  # empty: nothing to lose, nothing to refuse
    env = {"FDL_CACHE_DIR": str(home), "FDL_HOME": str(tmp_path / "fdl-home")}
    for extra in (["--dry-run"], ["--yes"]):
        result = run_fdl(["cache", "clean", *extra], cwd=tmp_path, env=env)
        assert result.exit_code == 2, result.output
        assert f"fdl did not make downloads ({home / 'libtorch'})" in result.stderr
        assert f"no {CACHE_TAG} of fdl's" in result.stderr and "FDL_CACHE_DIR" in result.stderr
    assert (home / "libtorch" / "notes.txt").is_file() and (home / "wheels").is_dir()
    listed = run_fdl(["cache", "list", "--json"], cwd=tmp_path, env=env)
    owned = {entry["name"]: entry["owned"] for entry in json.loads(listed.stdout)}
    assert owned["downloads"] is False and owned["wheels"] is True
    # the caches fdl made are still cleaned when the foreign one is left out
    done = run_fdl(["cache", "clean", "wheels", "--yes"], cwd=tmp_path, env=env)
    assert done.exit_code == 0, done.output
    assert not (home / "wheels").exists() and (home / "libtorch" / "notes.txt").is_file()


def test_a_cache_dir_fdl_makes_is_tagged_and_an_existing_one_is_not(tmp_path: Path) -> None:
    made = own_cache_dir(tmp_path / "a" / "cache")
    assert (made / CACHE_TAG).read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    (tmp_path / "mine").mkdir()
    own_cache_dir(tmp_path / "mine")
    assert not (tmp_path / "mine" / CACHE_TAG).exists()
