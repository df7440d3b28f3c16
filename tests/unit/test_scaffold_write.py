"""The writer: create what is missing, keep what is identical, skip what differs
unless forced (generated files only), never delete; dry runs write nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.errors import UsageError
from fdl.scaffold import GENERATED, USER, FileSpec, check_target, write_project
from tests.support.scaffold import planned

FILES = [
    FileSpec("a/generated.txt", "fdl's\n", kind=GENERATED),
    FileSpec("a/user.txt", "starting point\n", kind=USER),
    FileSpec("script.sh", "#!/bin/sh\n", mode=0o755, kind=USER),
]


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_new_directory_gets_every_file_with_its_mode(tmp_path: Path) -> None:
    report = write_project(tmp_path / "new", FILES)
    assert report.counts() == {"created": 3, "unchanged": 0, "overwritten": 0, "skipped": 0}
    assert _tree(tmp_path / "new") == {f.path: f.content for f in FILES}
    assert os.stat(tmp_path / "new" / "script.sh").st_mode & 0o777 == 0o755
    assert not any(p.name.startswith(".") for p in (tmp_path / "new").rglob("*"))  # no temp files


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    write_project(tmp_path, FILES)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    report = write_project(tmp_path, FILES)
    assert report.paths("unchanged") == [f.path for f in FILES]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_changed_files_are_skipped_unless_forced_and_then_only_generated_ones(
    tmp_path: Path,
) -> None:
    write_project(tmp_path, FILES)
    (tmp_path / "a/generated.txt").write_text("edited\n")
    (tmp_path / "a/user.txt").write_text("my code\n")
    (tmp_path / "mine.txt").write_text("not fdl's\n")
    report = write_project(tmp_path, FILES)
    assert report.paths("skipped") == ["a/generated.txt", "a/user.txt"]
    reasons = {r.path: r.reason for r in report.results}
    assert "--force rewrites it" in (reasons["a/generated.txt"] or "")
    assert "yours is kept" in (reasons["a/user.txt"] or "")
    assert (tmp_path / "a/generated.txt").read_text() == "edited\n"

    forced = write_project(tmp_path, FILES, force=True)
    assert forced.paths("overwritten") == ["a/generated.txt"]
    assert forced.paths("skipped") == ["a/user.txt"]
    assert (tmp_path / "a/generated.txt").read_text() == "fdl's\n"
    assert (tmp_path / "a/user.txt").read_text() == "my code\n"
    assert (tmp_path / "mine.txt").read_text() == "not fdl's\n"  # never deleted


def test_dry_run_writes_nothing_and_reports_the_same_decisions(tmp_path: Path) -> None:
    target = tmp_path / "p"
    report = write_project(target, FILES, dry_run=True)
    assert report.dry_run and report.paths("created") == [f.path for f in FILES]
    assert not target.exists()
    write_project(target, FILES)
    (target / "a/generated.txt").write_text("edited\n")
    dry = write_project(target, FILES, force=True, dry_run=True)
    assert dry.paths("overwritten") == ["a/generated.txt"]
    assert (target / "a/generated.txt").read_text() == "edited\n"


def test_things_in_the_way_are_skipped_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a file where a directory should be\n")
    (tmp_path / "elsewhere.txt").write_text("x\n")
    (tmp_path / "script.sh").symlink_to(tmp_path / "elsewhere.txt")
    report = write_project(tmp_path, FILES, force=True)
    reasons = {r.path: (r.action, r.reason or "") for r in report.results}
    assert (
        reasons["a/generated.txt"][0] == "skipped"
        and "a is a file" in reasons["a/generated.txt"][1]
    )
    assert reasons["script.sh"][0] == "skipped" and "symbolic link" in reasons["script.sh"][1]
    assert (tmp_path / "elsewhere.txt").read_text() == "x\n"


def test_non_empty_directories_need_force_unless_they_are_fdl_projects(tmp_path: Path) -> None:
    check_target(tmp_path / "missing", force=False)
    check_target(tmp_path, force=False)  # empty
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(UsageError) as caught:
        check_target(tmp_path, force=False)
    assert "is not empty and is not a project made by `fdl init`" in caught.value.message
    assert caught.value.hint is not None and "--force" in caught.value.hint
    check_target(tmp_path, force=True)
    (tmp_path / ".fdl-answers.yml").write_text("template: cpp\nanswers: {}\n")
    check_target(tmp_path, force=False)
    with pytest.raises(UsageError, match="is not a directory"):
        check_target(tmp_path / "notes.txt", force=True)


def test_a_real_plan_written_twice_is_idempotent(tmp_path: Path) -> None:
    files = list(planned("cpp", "mounted").values())
    first = write_project(tmp_path, files)
    assert first.counts()["created"] == len(files)
    second = write_project(tmp_path, files, force=True)
    assert second.counts()["unchanged"] == len(files)
