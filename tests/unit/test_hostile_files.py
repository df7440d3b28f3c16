"""Files of the user's that fdl reads besides the manifest, holding what a user or a crash
may leave there: bytes that are not UTF-8, a FIFO, TOML of another shape. Each ended in an
internal error (exit 70) or, for a FIFO, a read that never returned."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl._files import NotARegularFile, read_small_text
from fdl.bench import load_results
from fdl.ci import GeneratedFile, find_drift
from fdl.errors import ManifestError, UsageError
from fdl.libtorch.build import project_framework
from fdl.libtorch.build._dist import DistSettings, read_token
from fdl.tasks._compose_file import load_compose

NOT_UTF8 = b"services:\n  dev: {image: \xff}\n"


def test_a_compose_file_that_is_not_utf8_or_a_fifo_is_a_manifest_error(tmp_path: Path) -> None:
    compose = tmp_path / "docker-compose.yml"
    compose.write_bytes(NOT_UTF8)
    with pytest.raises(ManifestError, match="is not UTF-8 text") as caught:
        load_compose(compose, {})
    assert str(compose) in caught.value.message and caught.value.hint
    compose.unlink()
    os.mkfifo(compose)
    with pytest.raises(ManifestError, match="FIFO"):
        load_compose(compose, {})


def test_a_dotenv_that_is_not_utf8_is_a_manifest_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "docker-compose.yml").write_text("services:\n  dev: {image: x}\n")
    (tmp_path / ".env").write_bytes(b"A=\xff\n")
    with pytest.raises(ManifestError) as caught:
        load_compose(tmp_path / "docker-compose.yml", {})
    assert f"cannot read {tmp_path / '.env'}" in caught.value.message
    assert "NAME=value" in (caught.value.hint or "")


@pytest.mark.parametrize("kind", ["fifo", "not-utf8", "missing", "directory"])
def test_a_token_file_that_cannot_be_read_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    token = tmp_path / "token"
    if kind == "fifo":
        os.mkfifo(token)
    elif kind == "not-utf8":
        token.write_bytes(b"\xff\xfe\n")
    elif kind == "directory":
        token.mkdir()
    settings = DistSettings("http://127.0.0.1:10600", token_file=token, origin="fdl.yml:7:9")
    with pytest.raises(UsageError) as caught:
        read_token(settings, {})
    assert caught.value.message.startswith(
        f"fdl.yml:7:9: cannot read the sccache-dist token file {token} ("
    )
    assert "token_env" in (caught.value.hint or "")


def test_a_token_file_gives_its_first_line(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret \nrest\n")
    settings = DistSettings("http://127.0.0.1:10600", token_file=tmp_path / "token")
    assert read_token(settings, {}) == "s3cret"


@pytest.mark.parametrize(
    "cargo",
    ["workspace = 1\n", "dependencies = 'flodl'\n", "[workspace]\ndependencies = [1]\n"],
)
def test_a_cargo_toml_of_another_shape_is_not_a_framework(tmp_path: Path, cargo: str) -> None:
    (tmp_path / "Cargo.toml").write_text(cargo)
    assert project_framework(tmp_path) is None
    (tmp_path / "Cargo.toml").write_text("[workspace.dependencies]\nflodl = '0.3'\n")
    assert project_framework(tmp_path) == "flodl"


def test_drift_against_a_binary_file_at_a_generated_path_is_a_change(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "docker-bake.hcl").write_bytes(b"\xff\x00binary")
    drift = find_drift(tmp_path, [GeneratedFile("ci/docker-bake.hcl", "target {}\n")])
    assert [(change.path, change.state) for change in drift.changes] == [
        ("ci/docker-bake.hcl", "changed")
    ]


@pytest.mark.parametrize(
    ("make", "reason", "fix"),
    [
        (lambda p: Path("/dev/zero"), "is a device or special file", "pass a file written by"),
        (lambda p: os.mkfifo(p) or p, "is a FIFO", "pass a file written by"),
        (lambda p: p.write_bytes(b'{"type": "run"}\n\xff\n') and p, "not UTF-8", "pass a file"),
        (lambda p: p, "No such file", "run `fdl bench run` first"),
    ],
)
def test_a_results_file_that_is_not_one_is_refused_without_reading_it_all(
    tmp_path: Path, make, reason: str, fix: str
) -> None:  # type: ignore[no-untyped-def]
    """`fdl bench report /dev/zero` filled memory until the kernel killed it; a FIFO hung."""
    path = make(tmp_path / "bench.jsonl")
    with pytest.raises(UsageError) as caught:
        load_results(path)
    assert reason in caught.value.message and fix in (caught.value.hint or "")


def test_small_text_reads_a_large_file_whole_and_stops_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("x" * 300_000 + "end")
    assert read_small_text(path, limit=1 << 20) == "x" * 300_000 + "end"
    with pytest.raises(NotARegularFile, match="more than 1000"):
        read_small_text(path, limit=1000)
