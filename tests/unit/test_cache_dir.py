"""fdl's cache directory: the Linux fast path gives platformdirs' answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fdl.paths import Context, cache_dir

CASES = [
    {},
    {"XDG_CACHE_HOME": "/srv/cache"},
    {"XDG_CACHE_HOME": "/srv/cache/"},
    {"XDG_CACHE_HOME": "relative/cache"},
    {"XDG_CACHE_HOME": ""},
    {"XDG_CACHE_HOME": "  "},
    {"HOME": "/home/someone"},
    {"HOME": "relative-home"},
]


@pytest.mark.skipif(sys.platform != "linux", reason="the fast path is Linux's")
@pytest.mark.parametrize("extra", CASES, ids=[repr(case) for case in CASES])
def test_cache_dir_is_platformdirs_answer(
    extra: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from platformdirs import user_cache_dir

    monkeypatch.delenv("FDL_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name, value in extra.items():
        monkeypatch.setenv(name, value)
    assert cache_dir() == Path(user_cache_dir("fdl", appauthor=False))


def test_fdl_cache_dir_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/elsewhere")
    assert cache_dir({"FDL_CACHE_DIR": str(tmp_path)}) == tmp_path


def test_cache_dir_does_not_import_platformdirs_in_the_ordinary_case(tmp_path: Path) -> None:
    code = "import sys; from fdl.paths import cache_dir; cache_dir(); print('platformdirs' in sys.modules)"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_context_is_a_value() -> None:
    one, same, other = (
        Context(Path("/p"), True),
        Context(Path("/p"), True),
        Context(Path("/p"), False),
    )
    assert one == same and hash(one) == hash(same)
    assert one != other
    assert repr(one) == "Context(root=PosixPath('/p'), project=True)"
    assert one.libtorch_dir == Path("/p/libtorch")
