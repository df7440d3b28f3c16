"""The tests' artefact cache (tests/support/artefacts.py): where it is, what it takes from
the cache without asking pip, and skip locally / fail in CI when pip cannot get a wheel."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from packaging.tags import sys_tags

from tests.support import artefacts, downloads


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Artefacts optional, the cache in tmp_path."""
    monkeypatch.delenv("FDL_REQUIRE_DOCKER", raising=False)
    monkeypatch.delenv("FDL_REQUIRE_ARTEFACTS", raising=False)
    monkeypatch.delenv("FDL_REQUIRE_ALL", raising=False)  # .ci/run's: it requires them too
    monkeypatch.setenv("FDL_TEST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _wheel(folder: Path, name: str, version: str, platform: str | None = None) -> Path:
    tag = next(iter(sys_tags()))  # the tag pip prefers on this Python
    path = folder / f"{name}-{version}-{tag.interpreter}-{tag.abi}-{platform or tag.platform}.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FDL_TEST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert artefacts.cache_dir() == tmp_path / "xdg" / "fdl-tests"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert artefacts.cache_dir() == tmp_path / "home" / ".cache" / "fdl-tests"
    monkeypatch.setenv("FDL_TEST_CACHE", str(tmp_path / "mine"))
    assert artefacts.cache_dir() == tmp_path / "mine"


@pytest.mark.parametrize("variable", ["FDL_REQUIRE_DOCKER", "FDL_REQUIRE_ARTEFACTS"])
def test_a_missing_artefact_fails_where_artefacts_are_required(
    local: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    with pytest.raises(pytest.skip.Exception, match="no wheel"):
        artefacts.skip_or_fail("no wheel")
    monkeypatch.setenv(variable, "1")
    with pytest.raises(pytest.fail.Exception, match=re.escape("no wheel (artefacts are required")):
        artefacts.skip_or_fail("no wheel")


def test_the_cached_wheel_is_taken_without_pip(
    local: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = local / "wheels"
    old = _wheel(wheels, "nvidia_cuda_nvcc", "13.0.48")
    new = _wheel(wheels, "nvidia_cuda_nvcc", "13.0.88")
    _wheel(wheels, "nvidia_cuda_nvcc", "13.0.99", platform="win_fake")  # not for this machine
    _wheel(wheels, "nvidia_cuda_nvcc", "13.1.0")
    (wheels / "nvidia_cuda_nvcc-13.0.100.whl").write_bytes(b"")  # not a wheel's name

    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip was asked for a cached wheel")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert artefacts.pypi_wheel("nvidia-cuda-nvcc==13.0.*") == new
    assert artefacts.pypi_wheel("nvidia-cuda-nvcc==13.0.48") == old
    assert artefacts.cached_wheel("nvidia-cuda-nvcc==12.9.*", wheels) is None


def test_a_download_pip_cannot_make_leaves_nothing_in_the_cache(
    local: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[str]] = []

    def failing_pip(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        asked.append(argv)
        dest = Path(argv[argv.index("--dest") + 1])
        (dest / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"PK")
        return subprocess.CompletedProcess(argv, 1, "", "ERROR: connection reset")

    monkeypatch.setattr(subprocess, "run", failing_pip)
    with pytest.raises(
        pytest.skip.Exception, match=re.escape("pip could not download torch==2.14.1")
    ):
        artefacts.pypi_wheel("torch==2.14.1")
    assert asked and asked[0][-1] == "torch==2.14.1"
    assert {"--no-deps", "--only-binary=:all:"} <= set(asked[0])
    assert list((local / "wheels").iterdir()) == []
    monkeypatch.setenv("FDL_REQUIRE_DOCKER", "1")
    with pytest.raises(pytest.fail.Exception, match="connection reset"):
        artefacts.pypi_wheel("torch==2.14.1")


def test_the_downloaded_wheel_is_renamed_into_the_cache(
    local: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = next(iter(sys_tags()))
    name = f"demo-1.0-{tag.interpreter}-{tag.abi}-{tag.platform}.whl"

    def pip(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        (Path(argv[argv.index("--dest") + 1]) / name).write_bytes(b"PK")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(subprocess, "run", pip)
    noted = local / "downloads.jsonl"  # this fake's download is not the run's to list
    monkeypatch.setenv(downloads.VARIABLE, str(noted))
    assert artefacts.pypi_wheel("demo==1.0") == local / "wheels" / name
    assert sorted(p.name for p in (local / "wheels").iterdir()) == [name]
    entry = json.loads(noted.read_text())
    assert (entry["what"], entry["bytes"]) == (name, 2)
    assert entry["source"] == "the package index (pip download)"


def test_a_cached_dir_is_made_once_and_only_whole(local: Path) -> None:
    made: list[Path] = []

    def interrupted(folder: Path) -> None:
        (folder / "half").write_text("x")
        raise ConnectionResetError("the server went away")

    with pytest.raises(ConnectionResetError):
        artefacts.cached_dir("headers/torch-2.14.1", interrupted)
    assert list((local / "headers").iterdir()) == []

    def make(folder: Path) -> None:
        made.append(folder)
        (folder / "include").mkdir()

    tree = artefacts.cached_dir("headers/torch-2.14.1", make)
    assert tree == local / "headers" / "torch-2.14.1" and (tree / "include").is_dir()
    assert artefacts.cached_dir("headers/torch-2.14.1", make) == tree
    assert len(made) == 1 and not made[0].exists()
    assert [p.name for p in (local / "headers").iterdir()] == ["torch-2.14.1"]
