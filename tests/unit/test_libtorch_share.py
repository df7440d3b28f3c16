"""Pure parts of sharing variants through a registry: references, tags, annotations."""

from __future__ import annotations

import pytest

from fdl.errors import UsageError
from fdl.libtorch import VariantInfo
from fdl.libtorch.sources._oci import VariantMismatch, describe, image_annotations, variant_tag
from fdl.libtorch.sources._registry import parse_reference

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "host", "repository", "tag", "digest"),
    [
        ("127.0.0.1:5000/team/libtorch", "127.0.0.1:5000", "team/libtorch", None, None),
        ("reg.example.com/a/b/c:2.10.0-cu129", "reg.example.com", "a/b/c", "2.10.0-cu129", None),
        (f"localhost/t/l@{DIGEST}", "localhost", "t/l", None, DIGEST),
    ],
)
def test_references_parse(text: str, host: str, repository: str, tag, digest) -> None:
    ref = parse_reference(text)
    assert (ref.host, ref.repository, ref.tag, ref.digest) == (host, repository, tag, digest)


@pytest.mark.parametrize(
    "text", ["libtorch", "team/libtorch", "127.0.0.1:5000/Team/x", "h.io/x@sha256:12", "h.io/"]
)
def test_bad_references_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_reference(text)


def test_a_repository_is_wanted_without_a_tag() -> None:
    with pytest.raises(UsageError, match="names an image"):
        parse_reference("h.io/team/libtorch:1", repository_only=True)


def test_the_tag_says_what_the_variant_is() -> None:
    info = VariantInfo("builds/x", torch="2.10.0", cuda="12.9", abi="pre-cxx11")
    found = {"cubin": ["sm_61", "sm_120"], "ptx": ["compute_120"]}
    assert variant_tag(info, found) == "2.10.0-cu129-sm61-sm120-ptx120-precxx11"
    assert variant_tag(VariantInfo("precompiled/cpu", torch="2.13.0"), {}) == "2.13.0-cpu"


def test_annotations_read_back_and_a_foreign_image_is_refused() -> None:
    info = VariantInfo(
        "builds/x", torch="2.10.0", cuda="12.9", source={"kind": "build", "recipe": "docker"}
    )
    found = {"cubin": ["sm_61"], "ptx": []}
    labels = image_annotations(info, found, platform="linux/amd64", tag="t")
    described = describe(labels, "here")
    assert described.cubins == ("sm_61",) and described.built_by == "build (recipe docker)"
    assert described.covers_text == "sm_61"
    with pytest.raises(VariantMismatch, match="not a libtorch variant pushed by fdl"):
        describe({"org.opencontainers.image.title": "x"}, "here")


def test_an_index_token_recorded_before_fdl_hid_it_is_never_pushed() -> None:
    """Issue 42, 2: a variant.json written by an older fdl may hold the index URL with its
    credentials; the annotations (and labels) a push publishes hold ``***@`` instead."""
    secret = "s3cr3t-t0ken-4242"
    source = {
        "kind": "wheel",
        "view": "cpu",
        "index": f"https://fdl-user:{secret}@mirror.example/simple",
        "wheel": f"https://fdl-user:{secret}@mirror.example/files/torch.whl",
        "fetched_by": f"pip download torch --index-url https://u:{secret}@mirror.example/s",
    }
    info = VariantInfo("precompiled/cpu", torch="2.10.0", source=source)
    labels = image_annotations(info, {}, platform="linux/amd64", tag="t")
    assert "***@mirror.example" in labels["dev.fdl.libtorch.variant"]
    assert not [key for key, value in labels.items() if secret in value or "fdl-user" in value]
