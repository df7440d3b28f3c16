"""Behaviours of the compose lines that the mutation run (scripts/mutation.py) found untested."""

from __future__ import annotations

from fdl.tasks._compose import compose_run


def test_append_is_used_unless_the_caller_says_no() -> None:
    assert compose_run("cargo test", "--release", ["-p", "foo"], None) == (
        "cargo test --release -p foo"
    )


def test_a_separator_ending_append_is_kept_with_nothing_after_it() -> None:
    # `append: --release --`: the separator is the project's, even with no runner arguments
    assert compose_run("cargo test", "--release --", ["-p", "foo"], None) == (
        "cargo test --release -p foo --"
    )
    assert compose_run("cargo test", "--", [], None) == "cargo test --"
