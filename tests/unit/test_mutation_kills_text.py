"""The printable rule, the credential hiding and the file grammars, by example: behaviours the
mutation run (scripts/mutation.py) found that no unit test held (the CLI tests reach them
only through whole commands)."""

from __future__ import annotations

import pytest

from fdl._grammar import checked, count, describe, fill, refused_char
from fdl._text import did_you_mean, hide_credentials, plural, printable, terminal_text
from fdl.errors import EnvironmentProblem, UsageError


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, ünïcode", "plain text, ünïcode"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("one\ntwo\r", "one\\ntwo\\r"),
        ("\x00\x1f \x7f\x9f\xa0", "\\x00\\x1f \\x7f\\x9f\xa0"),
        ("\u202a\u202e\u202f", "\\u202a\\u202e\u202f"),
        ("\u2066\u2069\u206a", "\\u2066\\u2069\u206a"),
    ],
)
def test_printable_shows_every_control_character_as_an_escape(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_keeps_at_most_the_limit() -> None:
    assert printable("x" * 300) == "x" * 300
    assert printable("x" * 301) == "x" * 300 + "..."
    assert printable("abcdef", 3) == "abc..."
    assert printable("abc", 3) == "abc"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://me:s3cret@host/x", "https://***@host/x"),
        ("me@host:repo", "***@host:repo"),
        ("url='u:p@h'", "url='***@h'"),
        ("token ghp_abcdefghijklmnop12345", "token ***"),
        ("short abc123def456ghi789j", "short abc123def456ghi789j"),
        ("letters abcdefghijklmnopqrstuvwxyz", "letters abcdefghijklmnopqrstuvwxyz"),
        ("no credentials here", "no credentials here"),
    ],
)
def test_hide_credentials_hides_user_info_and_token_words(text: str, shown: str) -> None:
    assert hide_credentials(text) == shown


def test_hide_credentials_can_keep_the_words() -> None:
    text = "https://me:pw@host ghp_abcdefghijklmnop12345"
    assert hide_credentials(text, words=False) == "https://***@host ghp_abcdefghijklmnop12345"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("line\nnext\tcolumn", "line\nnext\tcolumn"),
        ("\x1b[31mred\x1b[0m", "\x1b[31mred\x1b[0m"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("over\rwrite", "over\\rwrite"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
    ],
)
def test_terminal_text_keeps_lines_tabs_and_colours_only(text: str, shown: str) -> None:
    assert terminal_text(text) == shown


def test_plural_and_did_you_mean() -> None:
    assert plural(1, "file") == "1 file"
    assert plural(0, "file") == "0 files"
    assert plural(3, "file") == "3 files"
    assert did_you_mean("instal", ["remove", "install"]) == "install"
    assert did_you_mean("zzz", ["remove", "install"]) is None


@pytest.mark.parametrize(
    ("char", "described"),
    [
        ("\n", "a line break"),
        ("\r", "a carriage return"),
        ("\t", "a tab"),
        ("\0", "a NUL"),
        ("\x1b", "the control character \\x1b"),
        (";", "the character ';'"),
    ],
)
def test_a_refused_character_is_named(char: str, described: str) -> None:
    assert describe(char) == described


def test_what_a_grammar_refuses_is_named() -> None:
    assert refused_char("cmake", "/opt/x y+z") is None
    assert refused_char("cmake", "") == "nothing (an empty value)"
    assert refused_char("cmake", "a;b") == "the character ';'"
    assert refused_char("linker", "a/*b") == "the sequence '/*'"
    assert refused_char("line", "x" * 256) is None
    assert refused_char("line", "x" * 257) == "257 characters (at most 256)"
    assert refused_char("cmake", "x" * 4096) is None
    assert refused_char("cmake", "x" * 4097) == "4097 characters (at most 4096)"


def test_a_refused_value_is_an_error_naming_what_where_and_the_fix() -> None:
    assert checked("cmake", "/opt/x", what="path", source="s", hint="h") == "/opt/x"
    with pytest.raises(EnvironmentProblem) as caught:
        checked("cmake", "a;b", what="library path", source="the wheel's RECORD", hint="fix")
    assert caught.value.message == (
        "the wheel's RECORD: library path 'a;b' holds the character ';', "
        "which fdl writes into no CMake file: nothing was written"
    )
    assert caught.value.hint == "fix"
    with pytest.raises(UsageError) as fact:
        checked("cuda", "12..1", what="CUDA", source="s", hint="h", error=UsageError)
    assert fact.value.message == (
        "s: CUDA '12..1' holds the sequence '..', which no CUDA version holds: nothing was written"
    )


def test_fill_writes_checked_values_and_names_the_refused_one() -> None:
    template = 'set(LIB "{lib_dir}")'
    assert fill("cmake", template, source="s", hint="h", lib_dir="/opt/lib") == (
        'set(LIB "/opt/lib")'
    )
    with pytest.raises(EnvironmentProblem, match=r"^s: lib dir '/opt/\$x' holds"):
        fill("cmake", template, source="s", hint="h", lib_dir="/opt/$x")


def test_a_number_read_as_bytes_is_ascii_digits_only() -> None:
    assert count(b" 12 ") == 12
    assert count(b"1\xb2") is None  # not ASCII: no number, and no error
    assert count("1²") is None
