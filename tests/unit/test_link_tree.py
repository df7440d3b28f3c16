"""fdl._files.link_tree: a source tree into a build context (the libtorch and NCCL builds)."""

from __future__ import annotations

from pathlib import Path

from fdl._files import link_tree


def test_files_are_linked_links_kept_and_only_top_level_names_skipped(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "build").mkdir(parents=True)
    (source / "build" / "old.o").write_text("stale")
    (source / "sub" / "build").mkdir(parents=True)
    (source / "sub" / "build" / "kept.txt").write_text("kept")
    (source / ".git").mkdir()
    (source / "setup.py").write_text("print(1)")
    (source / "link").symlink_to("setup.py")

    link_tree(source, tmp_path / "ctx", skip=frozenset({"build", ".git"}))

    ctx = tmp_path / "ctx"
    assert sorted(p.name for p in ctx.iterdir()) == ["link", "setup.py", "sub"]
    assert (ctx / "sub" / "build" / "kept.txt").read_text() == "kept"
    assert (ctx / "setup.py").stat().st_ino == (source / "setup.py").stat().st_ino
    assert (ctx / "link").is_symlink() and str((ctx / "link").readlink()) == "setup.py"
