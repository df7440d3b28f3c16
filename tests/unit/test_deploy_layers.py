"""Layer compression of deploy pushes: the choice per target, fdl's zstd push (against an
in-memory registry), the auto fallback to gzip, and docker's registry credentials."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from fdl.compat.layers import zstd_pullers
from fdl.deploy import (
    OCI_MANIFEST,
    ZSTD_LAYER,
    DeployTarget,
    choose_compression,
    push_image,
    push_zstd,
    split_reference,
)
from fdl.engine import DockerEngine
from fdl.engine._credentials import registry_credentials
from fdl.errors import EnvironmentProblem, UsageError
from fdl.net import RegistryError, registry_url
from fdl.runner import Completed
from tests.support.fakes import FakeEngine, FakeRunner

zstandard = pytest.importorskip("zstandard")


class MemoryRegistry:
    """The RegistryClient calls push_zstd makes, kept in memory."""

    def __init__(self, refuse_manifest: bool = False) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.refuse_manifest = refuse_manifest

    def has_blob(self, digest: str) -> bool:
        return digest in self.blobs

    def upload_blob(self, path: Path, digest: str) -> None:
        data = path.read_bytes()
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
        self.blobs[digest] = data

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> str:
        if self.refuse_manifest:
            raise RegistryError("MANIFEST_INVALID", status=400, code="MANIFEST_INVALID")
        self.manifests[reference] = (body, media_type)
        return "sha256:" + hashlib.sha256(body).hexdigest()


def _target(**fields: object) -> DeployTarget:
    return DeployTarget("t", str(fields.pop("kind", "slurm")), **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "method"),
    [
        ({"kind": "kubernetes"}, "zstd"),
        ({"kind": "slurm", "runtime": "docker"}, "gzip"),
        ({"kind": "slurm", "runtime": "pyxis"}, "gzip"),
        ({"kind": "slurm", "runtime": "apptainer"}, "gzip"),
        ({"kind": "slurm", "runtime": "podman"}, "gzip"),
        ({"kind": "slurm", "runtime": "docker", "compression": "zstd"}, "zstd"),
        ({"kind": "kubernetes", "compression": "gzip"}, "gzip"),
    ],
)
def test_auto_gives_zstd_only_to_runtimes_known_to_pull_it(
    fields: dict[str, object], method: str
) -> None:
    choice = choose_compression(_target(**fields))
    assert choice.method == method
    assert choice.falls_back == (choice.requested == "auto" and method == "zstd")


def test_every_runtime_has_a_sourced_row() -> None:
    from fdl.manifest.sections.deploy import RUNTIMES

    assert set(zstd_pullers()) == {*RUNTIMES, "kubernetes"}
    assert all(row.source and row.note for row in zstd_pullers().values())


def test_the_zstd_push_writes_an_oci_manifest_whose_layers_unpack_to_the_diff_ids(
    tmp_path: Path,
) -> None:
    engine = FakeEngine()
    engine.add_image("app:1")
    registry = MemoryRegistry()
    lines: list[str] = []
    result = push_zstd(
        engine, "app:1", "127.0.0.1:5000/acme/app:1", client=registry, on_line=lines.append
    )  # type: ignore[arg-type]
    body, media_type = registry.manifests["1"]
    assert media_type == OCI_MANIFEST
    assert result.digest == "sha256:" + hashlib.sha256(body).hexdigest()
    manifest = json.loads(body)
    assert manifest["mediaType"] == OCI_MANIFEST
    assert [layer["mediaType"] for layer in manifest["layers"]] == [ZSTD_LAYER]
    config = json.loads(registry.blobs[manifest["config"]["digest"]])
    tar = (
        zstandard.ZstdDecompressor()
        .stream_reader(io.BytesIO(registry.blobs[manifest["layers"][0]["digest"]]))
        .read()
    )
    assert ["sha256:" + hashlib.sha256(tar).hexdigest()] == config["rootfs"]["diff_ids"]
    with tarfile.open(fileobj=io.BytesIO(tar)) as unpacked:
        assert unpacked.extractfile("image").read() == b"app:1"  # type: ignore[union-attr]
    assert result.uploaded == 2 and result.layer_bytes == manifest["layers"][0]["size"]
    assert any("uploading layer 1/1" in line for line in lines)
    # A second push uploads nothing: the registry has every blob.
    again = push_zstd(engine, "app:1", "127.0.0.1:5000/acme/app:2", client=registry)  # type: ignore[arg-type]
    assert again.uploaded == 0 and again.digest == result.digest


def test_auto_falls_back_to_docker_push_when_the_registry_refuses_oci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = FakeEngine()
    engine.add_image("app:1")
    refusing = MemoryRegistry(refuse_manifest=True)
    monkeypatch.setattr("fdl.deploy._layers.RegistryClient", lambda *args, **kwargs: refusing)
    lines: list[str] = []
    result = push_image(
        engine, _target(kind="kubernetes"), "app:1", "reg.example:5000/acme/app:1",
        on_line=lines.append,
    )  # fmt: skip
    assert result.compression == "gzip" and engine.pushed == ["reg.example:5000/acme/app:1"]
    assert result.digest.startswith("sha256:")
    assert any("pushing with gzip instead" in line for line in lines)
    # Asked for explicitly, zstd is not silently replaced.
    with pytest.raises(RegistryError, match="MANIFEST_INVALID"):
        push_image(
            engine, _target(kind="kubernetes", compression="zstd"), "app:1",
            "reg.example:5000/acme/app:1",
        )  # fmt: skip


def test_gzip_targets_push_through_docker_unchanged() -> None:
    engine = FakeEngine()
    engine.add_image("app:1")
    result = push_image(engine, _target(runtime="docker"), "app:1", "127.0.0.1:5000/a/app:1")
    assert (result.compression, engine.pushed) == ("gzip", ["127.0.0.1:5000/a/app:1"])


def test_an_unbuilt_image_is_refused_before_any_upload() -> None:
    with pytest.raises(EnvironmentProblem, match="not built"):
        push_zstd(FakeEngine(), "never:1", "127.0.0.1:5000/a/b:1", client=MemoryRegistry())  # type: ignore[arg-type]


def test_references_and_urls() -> None:
    assert split_reference("127.0.0.1:5000/acme/app:1") == ("127.0.0.1:5000", "acme/app", "1")
    assert split_reference("ghcr.io/acme/app") == ("ghcr.io", "acme/app", "latest")
    with pytest.raises(UsageError, match="no registry host"):
        split_reference("acme/app:1")
    assert registry_url("127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert registry_url("localhost:5000") == "http://localhost:5000"
    assert registry_url("ghcr.io") == "https://ghcr.io"


def test_credentials_from_the_docker_config(tmp_path: Path) -> None:
    auth = base64.b64encode(b"me:s3cret").decode()
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "auths": {"https://ghcr.io": {"auth": auth}},
                "credHelpers": {"123.dkr.ecr.us-east-1.amazonaws.com": "ecr-login"},
            }
        )
    )
    env = {"DOCKER_CONFIG": str(tmp_path)}
    runner = FakeRunner(
        {
            ("docker-credential-ecr-login", "get"): Completed(
                [], 0, json.dumps({"Username": "AWS", "Secret": "tok"})
            )
        }
    )
    assert registry_credentials("ghcr.io", env, runner) == ("me", "s3cret")
    assert registry_credentials("quay.io", env, runner) is None
    ecr = "123.dkr.ecr.us-east-1.amazonaws.com"
    assert registry_credentials(ecr, env, runner) == ("AWS", "tok")
    assert registry_credentials("x.io", {"DOCKER_CONFIG": str(tmp_path / "none")}, runner) is None
    # The engine reads its own environment's config, not the host's.
    assert DockerEngine(runner, env).registry_credentials("ghcr.io") == ("me", "s3cret")


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ("{bad", "cannot be read"),
        ("[]", "the file is not a JSON object"),
        ('{"auths": []}', "auths is not a JSON object"),
        ('{"credHelpers": "ecr-login"}', "credHelpers is not a JSON object"),
        ('{"credsStore": 5}', "the credential helper for ghcr.io is not a name"),
        ('{"auths": {"ghcr.io": {"auth": "%%%"}}}', "not base64 of user:password"),
        ('{"auths": {"ghcr.io": {"auth": "/w=="}}}', "not base64 of user:password"),
    ],
)
def test_a_docker_config_that_is_not_dockers_is_refused_with_the_fix(
    tmp_path: Path, config: str, reason: str
) -> None:
    (tmp_path / "config.json").write_text(config)
    with pytest.raises(EnvironmentProblem) as caught:
        registry_credentials("ghcr.io", {"DOCKER_CONFIG": str(tmp_path)}, FakeRunner({}))
    assert reason in str(caught.value)
    assert caught.value.hint == "fix or remove the file, then `docker login` again"


def test_an_auths_entry_that_is_not_a_mapping_is_no_credentials(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"auths": {"ghcr.io": "x"}}')
    assert registry_credentials("ghcr.io", {"DOCKER_CONFIG": str(tmp_path)}, FakeRunner({})) is None


@pytest.mark.parametrize("answer", ["not json", "[]", '{"Username": "me"}', '{"Secret": 5}'])
def test_a_credential_helper_without_credentials_in_its_answer_is_refused(
    tmp_path: Path, answer: str
) -> None:
    (tmp_path / "config.json").write_text('{"credsStore": "pass"}')
    runner = FakeRunner({("docker-credential-pass", "get"): Completed([], 0, answer)})
    with pytest.raises(EnvironmentProblem, match="without a Username and a Secret"):
        registry_credentials("ghcr.io", {"DOCKER_CONFIG": str(tmp_path)}, runner)


def test_a_saved_layer_that_is_already_gzip_is_unpacked_first(tmp_path: Path) -> None:
    """An engine with the containerd image store saves its stored (gzip) blobs."""
    import gzip

    class GzipSaving(FakeEngine):
        def save(self, ref: str, dest: Path) -> Path:
            plain = super().save(ref, tmp_path / "plain.tar")
            with tarfile.open(plain) as source, tarfile.open(dest, "w") as target:
                for member in source.getmembers():
                    data = source.extractfile(member).read()  # type: ignore[union-attr]
                    if member.name.endswith("layer.tar"):
                        data = gzip.compress(data)
                    member.size = len(data)
                    target.addfile(member, io.BytesIO(data))
            return dest

    engine = GzipSaving()
    engine.add_image("app:1")
    registry = MemoryRegistry()
    result = push_zstd(engine, "app:1", "127.0.0.1:5000/acme/app:1", client=registry)  # type: ignore[arg-type]
    manifest = json.loads(registry.manifests["1"][0])
    tar = (
        zstandard.ZstdDecompressor()
        .stream_reader(io.BytesIO(registry.blobs[manifest["layers"][0]["digest"]]))
        .read()
    )
    config = json.loads(registry.blobs[manifest["config"]["digest"]])
    assert ["sha256:" + hashlib.sha256(tar).hexdigest()] == config["rootfs"]["diff_ids"]
    assert result.tar_bytes == len(tar)


def test_auto_without_zstandard_pushes_gzip_but_an_unreachable_registry_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from fdl.errors import NetworkError

    engine = FakeEngine()
    engine.add_image("app:1")
    # Nothing listens on port 9 of loopback: the zstd push cannot reach it, nor would gzip.
    with pytest.raises(NetworkError, match=r"cannot reach the registry 127\.0\.0\.1:9"):
        push_image(engine, _target(kind="kubernetes"), "app:1", "127.0.0.1:9/acme/app:1")
    assert engine.pushed == []
    monkeypatch.setitem(sys.modules, "zstandard", None)
    lines: list[str] = []
    result = push_image(
        engine, _target(kind="kubernetes"), "app:1", "127.0.0.1:9/acme/app:1",
        on_line=lines.append,
    )  # fmt: skip
    assert result.compression == "gzip" and engine.pushed == ["127.0.0.1:9/acme/app:1"]
    assert "`zstandard`" in lines[0] and lines[0].endswith("pushing with gzip instead")
