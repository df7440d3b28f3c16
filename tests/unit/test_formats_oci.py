"""OCI image readers (fdl.formats.oci) and the ELF header's machine (fdl.binaries), alone:
no registry, no libtorch tree but a few files."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from fdl.binaries import elf_machine
from fdl.errors import EnvironmentProblem
from fdl.formats.oci import (
    ImageMismatch,
    LayerBlob,
    check_config,
    image_config,
    image_manifest,
    layer_descriptors,
)
from fdl.libtorch.sources._oci import platform_of

GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def _elf(path: Path, machine: int, *, big: bool = False, bits: int = 2) -> Path:
    order = ">" if big else "<"
    ident = b"\x7fELF" + bytes([bits, 2 if big else 1, 1]) + bytes(9)
    path.write_bytes(ident + struct.pack(f"{order}HH", 3, machine) + bytes(44))
    return path


def test_the_machine_of_either_byte_order_and_class(tmp_path: Path) -> None:
    assert elf_machine(_elf(tmp_path / "a.so", 62)) == 62
    assert elf_machine(_elf(tmp_path / "b.so", 22, big=True, bits=1)) == 22
    (tmp_path / "script.so").write_text("INPUT(-ltorch_cpu -lc10)\n")
    assert elf_machine(tmp_path / "script.so") is None
    assert elf_machine(tmp_path / "missing.so") is None


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.so")
    (tmp_path / "link.so").symlink_to(_elf(tmp_path / "real.so", 62))
    assert elf_machine(tmp_path / "link.so") == 62  # a link to a library is followed
    assert elf_machine(tmp_path / "fifo.so") is None  # returns: no reader blocks on it


def test_the_platform_skips_a_linker_script_and_names_the_libraries_it_tried(
    tmp_path: Path,
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libtorch.so").write_text("/* fdl: CPU view */\nINPUT(-ltorch_cpu -lc10)\n")
    with pytest.raises(
        EnvironmentProblem, match=re.escape("libtorch.so, libtorch_cpu.so, libc10.so")
    ):
        platform_of(tmp_path)
    _elf(lib / "libtorch_cpu.so", 183)
    assert platform_of(tmp_path) == "linux/arm64"


def _layer(digest: str = "sha256:" + "a" * 64, size: object = 10) -> dict[str, object]:
    return {"mediaType": GZIP, "digest": digest, "size": size}


def test_layer_descriptors_are_checked_before_any_is_fetched() -> None:
    assert layer_descriptors({"layers": [_layer()]}, "r@d") == [("sha256:" + "a" * 64, 10)]
    for bad, why in [
        ({"mediaType": "text/plain"}, "not a gzip or zstd tar"),
        (_layer(digest="md5:x"), "no sha256 digest"),
        (_layer(size=True), "no valid size"),
        (_layer(size=-1), "no valid size"),
    ]:
        with pytest.raises(ImageMismatch, match=why):
            layer_descriptors({"layers": [_layer(), bad]}, "r@d")


def test_a_config_matches_its_manifest_or_is_refused(tmp_path: Path) -> None:
    blob = LayerBlob(tmp_path / "l", GZIP, "sha256:" + "b" * 64, "sha256:" + "c" * 64, 5)
    labels = {"dev.x.torch": "2.10.0", "other": "free"}
    config = image_config(labels, [blob], "linux/amd64")
    manifest = image_manifest(b"{}", [blob], {"dev.x.torch": "2.10.0"})
    assert manifest["config"]["size"] == 2 and manifest["layers"][0]["size"] == 5
    assert check_config(config, manifest, "r@d", "dev.x.") == config
    with pytest.raises(ImageMismatch, match="labels differ"):
        check_config(config, {**manifest, "annotations": {}}, "r@d", "dev.x.")
    with pytest.raises(ImageMismatch, match="lists 1 layers, its manifest 2"):
        check_config(config, {**manifest, "layers": [1, 2]}, "r@d", "dev.x.")
    with pytest.raises(ImageMismatch, match="not an OCI image config"):
        check_config([], manifest, "r@d", "dev.x.")
