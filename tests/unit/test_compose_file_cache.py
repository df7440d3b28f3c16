"""What fdl reads of a compose file is kept between runs (fdl.tasks._compose_file,
<cache>/compose/): an unchanged file is read without PyYAML, an edit is always seen, and
nothing but the services' images, working directories and volumes is kept (never the
file's text or its `environment:`). About 1 s (two interpreters)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.tasks._compose_file import load_compose

REPO = Path(__file__).resolve().parent.parent.parent
COMPOSE = """services:
  dev:
    image: ${IMAGE:-fdl-dev}:latest
    working_dir: /workspace
    environment:
      HF_TOKEN: hf_notarealtokenbutshapedlikeone1234
    volumes:
      - .:/workspace
      - type: bind
        source: ${LIBTORCH_HOST_PATH:-./libtorch}
        target: /usr/local/libtorch
        read_only: true
      - cargo-cache:/root/.cargo
volumes:
  cargo-cache:
"""

PROBE = """
import sys
from pathlib import Path
from fdl.tasks._compose_file import load_compose
project = load_compose(Path(sys.argv[1]), {"LIBTORCH_HOST_PATH": "/opt/libtorch"})
print(project.images, project.working_dirs, project.mounts, "yaml" in sys.modules)
"""


def _load(compose: Path, cache: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), FDL_CACHE_DIR=str(cache))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(compose)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def test_an_unchanged_compose_file_is_read_without_the_yaml_parser(tmp_path: Path) -> None:
    compose = tmp_path / "project" / "docker-compose.yml"
    compose.parent.mkdir()
    compose.write_text(COMPOSE)
    cache = tmp_path / "cache"
    first, again = _load(compose, cache), _load(compose, cache)
    assert first.endswith("True") and again.endswith("False"), (first, again)
    assert first[: -len("True")] == again[: -len("False")]
    assert "/opt/libtorch" in again and "/usr/local/libtorch" in again  # interpolated now
    (entry,) = (cache / "compose").glob("*.marshal")
    assert entry.stat().st_mode & 0o777 == 0o600
    kept = entry.read_bytes()
    assert b"hf_notarealtoken" not in kept and b"HF_TOKEN" not in kept and b"read_only" not in kept


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_an_edited_compose_file_is_read_again(tmp_path: Path, cache: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE)
    assert load_compose(compose, {}).working_dirs == {"dev": "/workspace"}
    compose.write_text(COMPOSE.replace("working_dir: /workspace", "working_dir: /src"))
    assert load_compose(compose, {}).working_dirs == {"dev": "/src"}


@pytest.mark.parametrize("content", [b"", b"garbage", b"\xe9\x00\x00\x00\x00"])
def test_a_damaged_entry_is_a_miss(tmp_path: Path, cache: Path, content: bytes) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE)
    expected = load_compose(compose, {})
    for entry in (cache / "compose").iterdir():
        entry.write_bytes(content)
    again = load_compose(compose, {})
    assert (again.images, again.working_dirs, again.mounts) == (
        expected.images,
        expected.working_dirs,
        expected.mounts,
    )


def test_pruning_keeps_the_newest_entries_and_other_files(tmp_path: Path, cache: Path) -> None:
    from fdl.tasks import _compose_file

    for index in range(_compose_file._MAX_KEPT_FILES + 5):
        compose = tmp_path / f"p{index}" / "compose.yaml"
        compose.parent.mkdir()
        compose.write_text(COMPOSE)
        load_compose(compose, {})
        if index == 0:
            (cache / "compose" / "notes.txt").write_text("not an entry")
    kept = [p.name for p in (cache / "compose").iterdir() if p.name != "CACHEDIR.TAG"]
    assert len(kept) == _compose_file._MAX_KEPT_FILES + 1 and "notes.txt" in kept
