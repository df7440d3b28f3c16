"""Masking behaviours the mutation run (scripts/mutation.py) found untested by examples: which
keys, values and nodes are secrets, and what the mask leaves of a value."""

from __future__ import annotations

import fnmatch

import pytest

from fdl.manifest._nodes import TAG_SECRET, MapNode, Origin, ScalarNode, SeqNode
from fdl.manifest._secrets import (
    MASK,
    _glob,
    is_secret_key,
    is_secret_node,
    is_secret_path,
    looks_secret,
    mask,
    redact,
    shown_text,
    token_kind,
)

HERE = Origin("fdl.yml", 1, 1)
GITHUB = "ghp_" + "a" * 36
OPENAI = "sk-" + "b" * 32


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_token", True),
        ("TOKEN", True),
        ("db_password", True),
        ("passwd", True),
        ("client_secret", True),
        ("ssh_key", True),
        ("ssh-key", True),
        ("_key", True),
        ("token_env", False),
        ("password_file", False),
        ("secret-path", False),
        ("key", False),
        ("keys", False),
        ("monkey", False),
        ("key_id", False),
        ("user", False),
        ("", False),
    ],
)
def test_a_key_is_secret_by_its_name(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_a_path_is_secret_when_any_key_on_it_is() -> None:
    assert is_secret_path(("registry", "api_token"))
    assert is_secret_path(("db_password", "value"))
    assert not is_secret_path(("registry", "user"))
    assert not is_secret_path(())


def test_a_value_shaped_like_a_token_is_found_past_a_shape_it_only_resembles() -> None:
    assert token_kind(GITHUB) == "a GitHub token"
    # a GitHub prefix too short for a GitHub token, then an OpenAI key: the OpenAI key
    assert token_kind(f"ghp_short {OPENAI}") == "an OpenAI key"
    assert token_kind("ghp_" + "a" * 35) is None
    assert token_kind("no needle in this value") is None
    assert token_kind("under_score but no token") is None


def test_shown_text_masks_a_token_and_nothing_else() -> None:
    assert shown_text(f"run with {GITHUB}") == MASK
    assert shown_text("cargo run --release") == "cargo run --release"


def test_a_value_looks_secret_when_a_string_inside_it_does() -> None:
    assert looks_secret(GITHUB)
    assert looks_secret({"a": "x", "b": {"c": GITHUB}})
    assert looks_secret(["x", [GITHUB]])
    assert not looks_secret({"a": "x", "b": ["y", 3]})
    assert not looks_secret(3)
    assert not looks_secret(None)


def test_a_node_is_secret_when_it_or_anything_inside_it_is_tagged() -> None:
    tagged = ScalarNode("pw", HERE, TAG_SECRET)
    plain = ScalarNode("x", HERE)
    assert is_secret_node(tagged)
    assert is_secret_node(MapNode({"a": plain, "b": tagged}, HERE))
    assert is_secret_node(SeqNode([plain, tagged], HERE))
    assert is_secret_node(MapNode({"a": SeqNode([tagged], HERE)}, HERE))
    assert not is_secret_node(MapNode({"a": plain}, HERE))
    assert not is_secret_node(SeqNode([plain], HERE))
    assert not is_secret_node(plain)
    assert not is_secret_node(None)


def test_the_mask_keeps_the_structure_and_the_empty_values() -> None:
    assert mask({"a": ["x", None, 3], "b": {"c": "y"}, "d": None}) == {
        "a": [MASK, None, MASK],
        "b": {"c": MASK},
        "d": None,
    }
    assert mask("x") == MASK
    assert mask(None) is None


def test_redact_masks_every_token_in_a_message_and_keeps_the_rest() -> None:
    text = redact(f"push to https://me:hunter2@example.com with {GITHUB} failed")
    assert text == f"push to https://{MASK}@example.com with {MASK} failed"


def test_a_value_holding_every_quick_character_is_still_searched() -> None:
    assert token_kind("A_b-c https://me:pw@host") == "a password in a URL"


def test_the_shapes_are_found_in_a_fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # each shape's regex is compiled on its first use and kept: from an empty cache too
    from fdl.manifest import _secrets

    monkeypatch.setattr(_secrets, "_compiled", {})
    assert token_kind(GITHUB) == "a GitHub token"
    monkeypatch.setattr(_secrets, "_compiled", {})
    assert redact(f"x {GITHUB} y") == f"x {MASK} y"
    assert token_kind(GITHUB) == "a GitHub token"  # and from the kept one


@pytest.mark.parametrize(
    ("text", "pattern"),
    [("ab", "ab*b"), ("xab", "*b*b"), ("ab", "a*a*b"), ("aa", "*a*a*"), ("a", "*a*a*")],
)
def test_the_key_glob_is_fnmatch_where_pieces_overlap(text: str, pattern: str) -> None:
    # what the random patterns of test_manifest_secrets.py rarely reach: pieces that the
    # text holds only where another piece already matched
    assert _glob(text, pattern) == fnmatch.fnmatchcase(text, pattern)
