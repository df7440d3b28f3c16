"""The Engine API through the docker SDK, against the real daemon: inspect (labels,
layers), save and disk usage come from the SDK and agree with the docker CLI; the CLI
is not asked for them (a recording wrapper of docker on PATH shows it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from fdl.engine import DockerEngine
from fdl.errors import EnvironmentProblem
from fdl.runner import SubprocessRunner

pytestmark = pytest.mark.docker


def _recording_docker(tmp_path: Path) -> tuple[dict[str, str], Path]:
    real = shutil.which("docker")
    assert real is not None
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls"
    script = folder / "docker"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    script.chmod(0o755)
    env = dict(os.environ, PATH=f"{folder}:{os.environ['PATH']}")
    env.pop("DOCKER_HOST", None)
    return env, log


def test_inspect_save_and_sizes_come_from_the_engine_api(tmp_path: Path, base_image: str) -> None:
    env, log = _recording_docker(tmp_path)
    engine = DockerEngine(SubprocessRunner(), env)
    info = engine.inspect_image(base_image)
    cli = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", base_image], capture_output=True, text=True, check=True
        ).stdout
    )[0]
    assert info.id == cli["Id"] and info.size == cli["Size"]
    assert info.labels == (cli["Config"].get("Labels") or {})
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--human=false", "--format", "{{json .}}", info.id],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert [layer.created_by for layer in info.layers] == [
        json.loads(line)["CreatedBy"] for line in reversed(history)
    ]
    usage = engine.disk_usage(base_image)
    assert usage.size > 0 and usage.unique_size + usage.shared_size == usage.size
    saved = engine.save(base_image, tmp_path / "image.tar")
    with tarfile.open(saved) as tar:
        assert "manifest.json" in tar.getnames()
    calls = log.read_text().splitlines()
    assert not [c for c in calls if c.startswith(("image inspect", "save", "history"))], calls
    with pytest.raises(EnvironmentProblem, match="no such image"):
        engine.inspect_image("fdl-no-such-image:never")
