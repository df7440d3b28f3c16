"""Composing run scripts: append splitting, the second `--`, POSIX quoting."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdl.tasks._compose import (
    compose_entry,
    compose_run,
    quote,
    quote_all,
    split_append,
    split_user_args,
)
from tests.support.tasks_helpers import ADVERSARIAL


def run_script(run: str, append: str | None, args: list[str], *, use_append: bool = True) -> str:
    before, after = split_user_args(args)
    return compose_run(
        run,
        append,
        quote_all(before),
        quote_all(after) if after is not None else None,
        use_append=use_append,
    )


@pytest.mark.parametrize(
    ("append", "expected"),
    [
        (None, ("", "", False)),
        ("--", ("", "", True)),
        ("-- x", ("", "x", True)),
        ("x --", ("x", "", True)),
        ("a -- b", ("a", "b", True)),
        ("--release", ("--release", "", False)),
        ("--no--sep", ("--no--sep", "", False)),
        ("a -- b -- c", ("a", "b -- c", True)),
    ],
)
def test_append_splits_on_its_first_standalone_separator(
    append: str | None, expected: tuple[str, str, bool]
) -> None:
    parts = split_append(append)
    assert (parts.pre, parts.post, parts.has_separator) == expected


@pytest.mark.parametrize(
    ("run", "append", "args", "expected"),
    [
        ("cargo test", None, [], "cargo test"),
        ("cargo test", "-- --nocapture", [], "cargo test -- --nocapture"),
        (
            "cargo test",
            "-- --nocapture",
            ["-p", "foo", "--", "--ignored"],
            "cargo test -p foo -- --nocapture --ignored",
        ),
        (
            "cargo test",
            "--release -- --nocapture",
            ["-p", "foo", "a b", "--", "--ignored"],
            "cargo test --release -p foo 'a b' -- --nocapture --ignored",
        ),
        ("cmd", "--no-ansi", ["--ansi"], "cmd --no-ansi --ansi"),
        ("echo hello", None, ["a", "b c"], "echo hello a 'b c'"),
        ("echo", None, ["x", "--", "y"], "echo x -- y"),
        ("echo", None, ["x", "--"], "echo x --"),
        ("  cargo build\n", None, ["-v"], "cargo build -v"),
    ],
)
def test_run_composition_matches_the_reference_layout(
    run: str, append: str | None, args: list[str], expected: str
) -> None:
    assert run_script(run, append, args) == expected


def test_no_append_drops_append_entirely() -> None:
    script = run_script("cargo test", "--release -- --nocapture", ["-p", "foo"], use_append=False)
    assert script == "cargo test -p foo"


def test_entry_takes_words_after_the_entry() -> None:
    assert compose_entry("python train.py ", quote_all(["--lr", "-0.1", "x y"])) == (
        "python train.py --lr -0.1 'x y'"
    )


@pytest.mark.parametrize("word", ADVERSARIAL)
def test_adversarial_words_round_trip_through_shell_parsing(word: str) -> None:
    assert shlex.split(quote(word)) == [word]


def test_safe_words_stay_bare_and_others_are_single_quoted() -> None:
    assert quote("--epochs=3") == "--epochs=3"
    assert quote("a/b.c:d@e,f+g") == "a/b.c:d@e,f+g"
    assert quote("") == "''"
    assert quote("it's") == "'it'\\''s'"
    assert '"' not in quote("$x") and quote("$x").startswith("'")


@given(
    st.lists(
        st.text(
            # surrogates are written as "$(printf '\ooo')", which only a shell reads back
            alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
            max_size=12,
        )
    )
)
def test_any_argv_round_trips(words: list[str]) -> None:
    script = run_script("prog", None, words)
    assert shlex.split(script) == ["prog", *words]


# Surrogates (bytes that are not UTF-8) are written as "$(printf '\ooo')", which only a
# shell reads back (shlex does not): they are left out of these shlex round trips.
WORDS = st.lists(
    st.text(
        alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
        max_size=8,
    ).filter(lambda w: w != "--"),
    max_size=4,
)


@given(WORDS, WORDS)
def test_second_separator_puts_runner_args_after_append_post(
    before: list[str], after: list[str]
) -> None:
    script = run_script("prog", "--pre -- --post", [*before, "--", *after])
    assert shlex.split(script) == ["prog", "--pre", *before, "--", "--post", *after]
