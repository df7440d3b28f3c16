"""zstd layer pushes against the real registry on 127.0.0.1 (scripts/setup-registry.sh):
the manifest the registry serves is an OCI manifest with zstd layers whose blobs unpack
to the config's diff_ids; the gzip path stays docker's; and the table's row for docker
matches what this host's docker does with a zstd image."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

from fdl.compat import version_key
from fdl.compat.layers import zstd_puller
from fdl.deploy import (
    OCI_MANIFEST,
    ZSTD_LAYER,
    DeployTarget,
    push_image,
    push_zstd,
)
from fdl.engine import DockerEngine
from fdl.net import RegistryClient
from fdl.runner import SubprocessRunner
from tests.conftest import BASE_IMAGE

pytestmark = pytest.mark.docker
zstandard = pytest.importorskip("zstandard")

REGISTRY = os.environ.get("FDL_TEST_REGISTRY", "127.0.0.1:5000")
ACCEPT = (OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json")


@pytest.fixture(scope="module")
def registry() -> str:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5).close()
    except OSError as exc:
        pytest.skip(f"no registry answers on {REGISTRY} ({exc}); run scripts/setup-registry.sh")
    return REGISTRY


def _diff_ids(client: RegistryClient, manifest: dict[str, object], work: Path) -> list[str]:
    config = manifest["config"]
    assert isinstance(config, dict)
    path = client.blob(str(config["digest"]), work / "config.json")
    return list(json.loads(path.read_text())["rootfs"]["diff_ids"])


def test_a_zstd_push_serves_zstd_layers_that_unpack_to_the_diff_ids(
    registry: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:10]
    remote = f"{registry}/fdl-test/zstd:{tag}"
    result = push_zstd(DockerEngine(SubprocessRunner()), BASE_IMAGE, remote)
    client = RegistryClient(registry, "fdl-test/zstd")
    served = client.manifest(tag, ACCEPT)
    assert served.media_type == OCI_MANIFEST and served.digest == result.digest
    manifest = json.loads(served.body)
    assert [layer["mediaType"] for layer in manifest["layers"]] == [ZSTD_LAYER] * len(
        manifest["layers"]
    )
    diff_ids = _diff_ids(client, manifest, tmp_path)
    unpacked = []
    for index, layer in enumerate(manifest["layers"]):
        blob = client.blob(layer["digest"], tmp_path / f"layer{index}")
        digest = hashlib.sha256()
        with blob.open("rb") as handle:
            reader = zstandard.ZstdDecompressor().stream_reader(handle)
            while chunk := reader.read(1 << 20):
                digest.update(chunk)
        unpacked.append(f"sha256:{digest.hexdigest()}")
    assert unpacked == diff_ids
    # The diff_ids are the local image's: the pushed image is exactly the one that was built.
    local = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{json .RootFS.Layers}}", BASE_IMAGE],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert json.loads(local) == diff_ids


def test_a_gzip_target_pushes_through_docker_as_before(registry: str) -> None:
    engine = DockerEngine(SubprocessRunner())
    tag = uuid.uuid4().hex[:10]
    remote = f"{registry}/fdl-test/gzip:{tag}"
    target = DeployTarget("lab", "slurm", registry=f"{registry}/fdl-test", runtime="docker")
    try:
        result = push_image(engine, target, BASE_IMAGE, remote)
    finally:
        engine.remove_image(remote, force=True)
    assert result.compression == "gzip"
    served = RegistryClient(registry, "fdl-test/gzip").manifest(tag, ACCEPT)
    assert served.digest == result.digest
    manifest = json.loads(served.body)
    assert {layer["mediaType"] for layer in manifest["layers"]} == {
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    }


def test_this_dockers_zstd_pull_matches_the_table(registry: str, tmp_path: Path) -> None:
    """A layer docker has never seen, pushed with zstd, then pulled by digest."""
    engine = DockerEngine(SubprocessRunner())
    marker = uuid.uuid4().hex
    local = f"fdl-test/zstd-probe:{marker[:10]}"
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nRUN echo {marker} > /probe\n")
    subprocess.run(["docker", "build", "-q", "-t", local, str(tmp_path)], check=True,
                   capture_output=True)  # fmt: skip
    result = push_zstd(engine, local, f"{registry}/fdl-test/probe:{marker[:10]}")
    engine.remove_image(local, force=True)
    by_digest = f"{registry}/fdl-test/probe@{result.digest}"
    pulled = subprocess.run(["docker", "pull", by_digest], capture_output=True, text=True)
    engine.remove_image(by_digest, force=True)
    server = engine.describe().client.server_version or "0"
    since = zstd_puller("docker").since or ""
    expected = version_key(server) >= version_key(since.split()[-1])
    assert (pulled.returncode == 0) == expected, pulled.stderr
    if not expected:
        assert "invalid tar header" in pulled.stderr
