"""FakeEngine and DockerEngine, twins: the same image scenario on both (issue 46: the fake
was held to the real engine's signatures only). What the fake pretends (build, labels,
tags, listing, push by digest, removal, the errors for a missing image) is what the real
engine does against the docker daemon and the local registry."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.engine import DockerEngine, Engine
from fdl.engine._types import BuildSpec
from fdl.errors import FdlError
from tests.conftest import BASE_IMAGE
from tests.support.fakes import FakeEngine
from tests.support.machine import skip_or_fail

pytestmark = pytest.mark.docker

REGISTRY = "127.0.0.1:5000"


@pytest.fixture(params=["DockerEngine", "FakeEngine"])
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[Engine, str]]:
    """An engine and a name no other run uses; the real one's images removed after."""
    name = f"fdl-twin-{uuid.uuid4().hex[:10]}"
    if request.param == "FakeEngine":
        fake = FakeEngine()
        fake.add_image(BASE_IMAGE)
        yield fake, name
        return
    real = DockerEngine()
    yield real, name
    for ref in real.list_images(f"*{name}*") + real.list_images(f"{REGISTRY}/{name}"):
        real.remove_image(ref, force=True)


def _registry() -> None:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5).close()
    except OSError as exc:
        skip_or_fail("registry", f"no registry answers on {REGISTRY} ({exc})")


def test_an_image_built_tagged_pushed_and_removed(engine, tmp_path: Path) -> None:
    runner, name = engine
    ref = f"{name}:1"
    spec = BuildSpec(
        tmp_path,
        dockerfile_text=f'FROM {BASE_IMAGE}\nLABEL dev.fdl.twin="in the file"\n',
        tags=(ref,),
        labels={"dev.fdl.given": "by the spec"},
    )
    built = runner.build(spec)
    assert built.tags == (ref,) and built.image_id.startswith("sha256:")
    assert runner.image_exists(ref)
    info = runner.inspect_image(ref)
    assert info.id == built.image_id and ref in info.tags
    assert info.labels["dev.fdl.twin"] == "in the file"
    assert info.labels["dev.fdl.given"] == "by the spec"
    assert runner.inspect_image(built.image_id).id == built.image_id  # by id too

    runner.tag(ref, f"{name}:2")
    assert runner.list_images(f"{name}:*") == [ref, f"{name}:2"]

    _registry()
    remote = f"{REGISTRY}/{name}:1"
    runner.tag(ref, remote)
    runner.push(remote)
    digests = runner.inspect_image(remote).repo_digests
    assert any(re.fullmatch(rf"{REGISTRY}/{name}@sha256:[0-9a-f]{{64}}", d) for d in digests)

    assert runner.remove_image(f"{name}:2") is True
    assert runner.list_images(f"{name}:*") == [ref]
    assert runner.remove_image(f"{name}:2") is False  # gone: no error, False


def test_a_missing_image_is_an_error_that_names_it(engine) -> None:
    runner, name = engine
    missing = f"{name}:absent"
    assert runner.image_exists(missing) is False
    with pytest.raises(FdlError) as caught:
        runner.inspect_image(missing)
    # the real engine's API path adds the name and is an environment problem (exit 4), its
    # CLI path (no daemon socket to ask) a failure (exit 1): both start so, with this fix
    assert caught.value.message.startswith(f"inspecting image {missing} failed: no such image")
    assert caught.value.hint == "build it first, or check the name (`docker image ls`)"
