"""The three-way merge of `fdl init --update`: hand-checked cases and properties."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdl.scaffold._merge import merge3

BASE = "a\nb\nc\nd\ne\nf\n"


def test_changes_on_different_lines_merge_cleanly() -> None:
    result = merge3(BASE, "a\nB\nc\nd\ne\nf\nmine\n", "a\nb\nc\nD\ne\nf\n")
    assert (result.text, result.conflicts) == ("a\nB\nc\nD\ne\nf\nmine\n", 0)


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    result = merge3(BASE, "a\nX\nc\nd\ne\nf\n", "a\nX\nc\nd\ne\nf\n")
    assert (result.text, result.conflicts) == ("a\nX\nc\nd\ne\nf\n", 0)


def test_different_changes_to_the_same_lines_are_marked_as_git_marks_them() -> None:
    result = merge3(
        BASE, "a\nX\nc\nd\ne\nf\n", "a\nY\nc\nd\ne\nf\n", labels=("yours", "base", "v2")
    )
    assert result.conflicts == 1
    assert (
        result.text == "a\n<<<<<<< yours\nX\n||||||| base\nb\n=======\nY\n>>>>>>> v2\nc\nd\ne\nf\n"
    )


def test_a_deletion_against_an_untouched_hunk_is_taken() -> None:
    assert merge3(BASE, "a\nb\nc\nf\n", "a\nb\nc\nd\ne\nf\nnew\n").text == "a\nb\nc\nf\nnew\n"


def test_a_missing_final_newline_does_not_glue_lines() -> None:
    assert merge3("x\n", "x\ny", "w\nx\n").text == "w\nx\ny\n"


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "e\n"]), max_size=8)


@given(lines, lines)
def test_one_sided_changes_are_taken_whole(base: list[str], other: list[str]) -> None:
    b, o = "".join(base), "".join(other)
    assert merge3(b, o, b).text == o and merge3(b, b, o).text == o
    assert merge3(b, o, o).text == o


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("yours", "new"),
    [
        ("a\nB\nc\nd\ne\nf\n", "a\nb\nc\nd\nE\nf\n"),
        ("x\na\nb\nc\nd\ne\nf\n", "a\nb\nc\nd\ne\nf\ny\n"),
        ("a\nc\nd\ne\nf\n", "a\nb\nc\nd\ne\n"),
    ],
)
def test_clean_merges_agree_with_git_merge_file(tmp_path: Path, yours: str, new: str) -> None:
    for name, text in (("base", BASE), ("yours", yours), ("new", new)):
        (tmp_path / name).write_text(text)
    proc = subprocess.run(
        [
            "git",
            "merge-file",
            "-p",
            str(tmp_path / "yours"),
            str(tmp_path / "base"),
            str(tmp_path / "new"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0  # git merged it without conflict too
    assert merge3(BASE, yours, new).text == proc.stdout
