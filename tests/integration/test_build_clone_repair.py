"""The builder image's clone is repaired, not trusted (issue 14): a clone that died leaves
no checkout behind, a checkout that is not the tag's commit is cloned again, and submodules
an interrupted fetch left out are fetched again. Runs the image's own build.sh (fetch part)
against a local repository with a tag and a submodule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BUILD_SH = Path(__file__).resolve().parents[2] / "dockerfiles" / "libtorch-builder" / "build.sh"
GIT_ENV = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "protocol.file.allow",
    "GIT_CONFIG_VALUE_0": "always",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    third = tmp_path / "third_party_lib"
    third.mkdir()
    git("init", "-q", "-b", "main", cwd=third)
    (third / "lib.h").write_text("// a submodule\n")
    git("add", ".", cwd=third)
    git("commit", "-q", "-m", "lib", cwd=third)
    repo = tmp_path / "pytorch"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "version.txt").write_text("9.9.9\n")
    git("add", ".", cwd=repo)
    git("submodule", "add", "-q", f"file://{third}", "third_party/lib", cwd=repo)
    git("commit", "-q", "-m", "release", cwd=repo)
    git("tag", "v9.9.9", cwd=repo)
    return repo


def fetch(tmp_path: Path, upstream: Path) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "cache" / "src"
    src.parent.mkdir(exist_ok=True)
    clone = (
        "git clone --depth 1 --branch v9.9.9 --recurse-submodules --shallow-submodules "
        f"file://{upstream} {src}.partial"
    )
    env = {**os.environ, **GIT_ENV, "FDL_SRC": str(src), "FDL_CLONE": clone}
    env.update({"FDL_TAG": "v9.9.9", "FDL_FETCH_ONLY": "1"})
    return subprocess.run(["sh", str(BUILD_SH)], env=env, capture_output=True, text=True)


def test_fresh_interrupted_and_incomplete_checkouts(tmp_path: Path, upstream: Path) -> None:
    src = tmp_path / "cache" / "src"
    first = fetch(tmp_path, upstream)
    assert first.returncode == 0, first.stderr
    assert (src / "version.txt").is_file() and (src / "third_party" / "lib" / "lib.h").is_file()
    assert not Path(f"{src}.partial").exists()

    # an interrupted submodule fetch: the submodule is not checked out
    git("submodule", "deinit", "-q", "-f", "third_party/lib", cwd=src)
    assert not (src / "third_party" / "lib" / "lib.h").exists()
    again = fetch(tmp_path, upstream)
    assert again.returncode == 0, again.stderr
    assert "fetching the submodules an interrupted clone left out" in again.stdout
    assert (src / "third_party" / "lib" / "lib.h").is_file()

    # a broken tree (not the tag's commit) and a leftover partial clone
    subprocess.run(["rm", "-rf", str(src)], check=True)
    src.mkdir()
    git("init", "-q", cwd=src)
    Path(f"{src}.partial").mkdir()
    (Path(f"{src}.partial") / "junk").write_text("half a clone\n")
    repaired = fetch(tmp_path, upstream)
    assert repaired.returncode == 0, repaired.stderr
    assert "is not a complete checkout of v9.9.9: cloning again" in repaired.stdout
    assert git("rev-parse", "HEAD", cwd=src) == git("rev-parse", "v9.9.9^{commit}", cwd=upstream)
    assert not Path(f"{src}.partial").exists()


def _nccl(tmp_path: Path) -> Path:
    nccl = tmp_path / "nccl"
    nccl.mkdir()
    git("init", "-q", "-b", "master", cwd=nccl)
    (nccl / "README.md").write_text("NCCL\n")
    git("add", ".", cwd=nccl)
    git("commit", "-q", "-m", "nccl", cwd=nccl)
    git("tag", "v2.99.9-1", cwd=nccl)
    return nccl


def _release_with(upstream: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (upstream / name).parent.mkdir(parents=True, exist_ok=True)
        (upstream / name).write_text(text)
    git("add", ".", cwd=upstream)
    git("commit", "-q", "-m", "pins", cwd=upstream)
    git("tag", "-f", "v9.9.9", cwd=upstream)


def test_the_fetch_phase_clones_what_the_build_would_clone(
    tmp_path: Path, upstream: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NCCL: cloned at the pinned tag in the fetch phase, not an hour into the compile."""
    nccl = _nccl(tmp_path)
    _release_with(upstream, {".ci/docker/ci_commit_pins/nccl.txt": "v2.99.9-1\n"})
    monkeypatch.setenv("FDL_NCCL_REPO", f"file://{nccl}")
    done = fetch(tmp_path, upstream)
    assert done.returncode == 0, done.stderr
    src = tmp_path / "cache" / "src"
    assert (src / "third_party" / "nccl" / "README.md").is_file()
    assert "fetching NCCL v2.99.9-1" in done.stdout


def test_a_tree_with_optional_submodules_py_runs_it(
    tmp_path: Path, upstream: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "import pathlib\npathlib.Path('third_party/fetched-by-pytorch').write_text('x')\n"
    _release_with(upstream, {"tools/optional_submodules.py": script})
    monkeypatch.setenv("FDL_NCCL_REPO", "file:///nonexistent")  # must not be used
    done = fetch(tmp_path, upstream)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cache" / "src" / "third_party" / "fetched-by-pytorch").is_file()
