"""Secret detection without compiling at start-up: the same answers as the plain rules."""

from __future__ import annotations

import fnmatch
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fdl.manifest._secrets import (
    SECRET_KEY_PATTERNS,
    TOKEN_SHAPES,
    _glob,
    is_secret_key,
    redact,
    token_kind,
)

NEEDLES = [needle for _, needles, _ in TOKEN_SHAPES for needle in needles]
PIECES = st.one_of(
    st.sampled_from([*NEEDLES, "gh", "gl", "sk", "xox", "://", "@", ":", "/", " ", "-"]),
    st.text(alphabet="AKIZaz09_-", min_size=1, max_size=40),
)


def brute_force(value: str) -> str | None:
    """Every shape's regex searched, as before the needles."""
    for kind, _needles, pattern in TOKEN_SHAPES:
        if re.search(pattern, value):
            return kind
    return None


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_the_needles_never_hide_a_token(value: str) -> None:
    assert token_kind(value) == brute_force(value)


def test_every_literal_text_holds_one_of_the_quick_characters() -> None:
    from fdl.manifest._secrets import _NEEDLE_CHARACTERS

    for needle in NEEDLES:
        assert any(character in needle for character in _NEEDLE_CHARACTERS), needle


def test_every_shape_is_found() -> None:
    samples = {
        "a GitHub token": "x=ghp_" + "a" * 36,
        "a GitLab token": "glpat-" + "b" * 20,
        "an AWS access key id": "AKIA" + "C" * 16,
        "a Hugging Face token": "hf_" + "d" * 30,
        "a PyPI token": "pypi-AgE" + "e" * 50,
        "a Slack token": "xoxb-" + "1" * 10,
        "an npm token": "npm_" + "f" * 36,
        "a Google API key": "AIza" + "g" * 35,
        "a Stripe secret key": "sk_live_" + "h" * 20,
        "an OpenAI key": "sk-proj-" + "i" * 32,
        "a private key": "-----BEGIN RSA PRIVATE KEY-----",
        "a password in a URL": "https://me:hunter2@example.com",
    }
    assert {kind for kind, _, _ in TOKEN_SHAPES} == set(samples)
    for kind, value in samples.items():
        assert token_kind(value) == kind
        assert value not in redact(f"before {value} after")


@settings(max_examples=3000, deadline=None)
@given(
    st.text(alphabet="tokenpaswdscr_-ky*", max_size=14),
    st.text(alphabet="tokenpaswdscr_-ky", max_size=20),
)
def test_the_glob_is_fnmatch_for_star_patterns(pattern: str, text: str) -> None:
    assert _glob(text, pattern) == fnmatch.fnmatchcase(text, pattern)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="TOKENpasswdSecret_-KEYfilenv", max_size=20))
def test_secret_keys_as_fnmatch_named_them(key: str) -> None:
    lowered = key.lower()
    expected = not lowered.endswith(("_env", "-env", "_file", "-file", "_path", "-path")) and any(
        fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_KEY_PATTERNS
    )
    assert is_secret_key(key) == expected
