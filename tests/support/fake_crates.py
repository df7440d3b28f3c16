"""Crates made for the tests: ``.crate`` archives (gzip tar, as cargo packages them), a
``CARGO_HOME`` whose registry cache holds them, and a sparse registry served on 127.0.0.1
(Rust's index protocol: ``config.json``, one JSON line per version at ``3/t/tch``,
``fl/od/flodl``; the archives at its ``dl`` address) that cargo itself fetches from."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.faulty_http import FaultyServer

__all__ = [
    "REGISTRY_DIR",
    "TORCH_SYS_BUILD",
    "crate",
    "flodl_files",
    "index_path",
    "put_in_cache",
    "serve_registry",
]

REGISTRY_DIR = "index.crates.io-1949cf8c6b5b557f"  # the directory cargo names crates.io's

TORCH_SYS_BUILD = """// torch-sys build script (the part fdl reads)
use std::path::PathBuf;

const TORCH_VERSION: &str = "{torch}";

fn compile() {{
    builder.flag("-std=c++{cxx}");
}}
"""


def flodl_files(torch: str = "2.13.0", cxx: int = 17) -> dict[str, dict[str, str]]:
    """flodl-cli's and flodl-sys's files stating ``torch`` and ``cxx`` (as 0.8.0 does)."""
    return {
        "flodl-cli": {
            "src/libtorch/download.rs": f'use std::fs;\n\nconst LIBTORCH_VERSION: &str = "{torch}";\n',
            "src/libtorch/build.rs": f'\nconst LIBTORCH_VERSION: &str = "{torch}";\n',
            "src/init.rs": f'const DOCKERFILE: &str = r#"\nFROM ubuntu\nARG LIBTORCH_VERSION={torch}\n"#;\n',
        },
        "flodl-sys": {"build.rs": f'fn main() {{\n    cc::Build::new().std("c++{cxx}");\n}}\n'},
    }


def crate(name: str, version: str, files: Mapping[str, str | bytes]) -> bytes:
    """A ``.crate``: ``<name>-<version>/`` holding ``files`` and a Cargo.toml."""
    buffer = io.BytesIO()
    members = {
        "Cargo.toml": f'[package]\nname = "{name}"\nversion = "{version}"\nedition = "2021"\n'
        '\n[lib]\npath = "lib.rs"\n',
        "lib.rs": "",
        **files,
    }
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, content in members.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def put_in_cache(home: Path, name: str, version: str, data: bytes) -> Path:
    """``data`` as cargo's downloaded ``<name>-<version>.crate`` under ``home``."""
    directory = home / "registry" / "cache" / REGISTRY_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}.crate"
    path.write_bytes(data)
    return path


def index_path(name: str) -> str:
    """The index file of ``name`` (Rust's layout: ``1/a``, ``3/t/tch``, ``fl/od/flodl``)."""
    if len(name) <= 2:
        return f"{len(name)}/{name}"
    if len(name) == 3:
        return f"3/{name[0]}/{name}"
    return f"{name[:2]}/{name[2:4]}/{name}"


def serve_registry(
    server: FaultyServer,
    crates: Mapping[tuple[str, str], bytes],
    *,
    yanked: frozenset[tuple[str, str]] = frozenset(),
) -> str:
    """Serve ``crates`` ((name, version) -> archive) as a sparse registry under
    ``/index/`` (archives under ``/dl/``); returns cargo's ``sparse+`` address."""
    server.add(
        "/index/config.json",
        json.dumps({"dl": server.url("/dl/{crate}/{version}/download")}).encode(),
    )
    lines: dict[str, list[str]] = {}
    for (name, version), data in sorted(crates.items()):
        entry = {
            "name": name,
            "vers": version,
            "deps": [],
            "cksum": hashlib.sha256(data).hexdigest(),
            "features": {},
            "yanked": (name, version) in yanked,
        }
        lines.setdefault(name, []).append(json.dumps(entry))
        server.add(f"/dl/{name}/{version}/download", data)
    for name, entries in lines.items():
        server.add(f"/index/{index_path(name)}", ("\n".join(entries) + "\n").encode())
    return "sparse+" + server.url("/index/")
