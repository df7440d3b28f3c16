"""The background sha256 gives the same digest as hashlib, whatever the chunking."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdl.net._digest import BackgroundSha256


@given(st.lists(st.binary(max_size=5000), max_size=40))
def test_same_digest_as_hashlib(chunks):
    background = BackgroundSha256()
    for chunk in chunks:
        background.update(chunk)
    assert background.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest()
    assert background.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest()


def test_no_update_after_the_digest():
    background = BackgroundSha256()
    background.update(b"x")
    background.hexdigest()
    with pytest.raises(RuntimeError):
        background.update(b"y")
