"""Push by digest against a real registry on 127.0.0.1 (Debian's docker-registry, started by
scripts/setup-registry.sh): the digest fdl resolves is the one the registry serves, and the
image pulls by it."""

from __future__ import annotations

import os
import urllib.request
import uuid

import pytest

from fdl.deploy import push_by_digest
from fdl.engine import DockerEngine
from fdl.errors import EnvironmentProblem
from fdl.runner import SubprocessRunner
from tests.conftest import BASE_IMAGE

pytestmark = pytest.mark.docker

REGISTRY = os.environ.get("FDL_TEST_REGISTRY", "127.0.0.1:5000")
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    )
)


@pytest.fixture(scope="module")
def registry() -> str:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5).close()
    except OSError as exc:
        pytest.skip(f"no registry answers on {REGISTRY} ({exc}); run scripts/setup-registry.sh")
    return REGISTRY


def test_the_pushed_digest_is_the_registrys_and_pulls(registry: str) -> None:
    engine = DockerEngine(SubprocessRunner())
    tag = uuid.uuid4().hex[:10]
    remote = f"{registry}/fdl-test/deploy:{tag}"
    try:
        digest = push_by_digest(engine, BASE_IMAGE, remote)
        request = urllib.request.Request(
            f"http://{registry}/v2/fdl-test/deploy/manifests/{tag}",
            method="HEAD",
            headers={"Accept": MANIFEST_TYPES},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["Docker-Content-Digest"] == digest
        by_digest = f"{registry}/fdl-test/deploy@{digest}"
        SubprocessRunner().run(["docker", "pull", by_digest])
        assert engine.inspect_image(by_digest).id == engine.inspect_image(BASE_IMAGE).id
    finally:
        engine.remove_image(remote, force=True)


def test_an_image_never_built_is_refused_before_pushing(registry: str) -> None:
    engine = DockerEngine(SubprocessRunner())
    with pytest.raises(EnvironmentProblem, match="not built"):
        push_by_digest(engine, "fdl-never-built:nothing", f"{registry}/x/y:z")
