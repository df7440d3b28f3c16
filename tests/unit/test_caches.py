"""fdl's caches: listed with their size, cleaned by name, nothing else touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.errors import UsageError
from fdl.libtorch import clean_caches, list_caches
from fdl.paths import Context
from tests.support.fakes import FakeEngine


def test_list_and_clean_only_fdls_caches(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    (cache / "wheels" / "torch.whl").write_bytes(b"x" * 5000)
    (cache / "mine.txt").write_text("not a cache of fdl's\n")
    context = Context(tmp_path / "project", project=True)
    (context.libtorch_dir / ".build-cache" / "venv").mkdir(parents=True)
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
    (cache / "wheels").mkdir(parents=True)
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
