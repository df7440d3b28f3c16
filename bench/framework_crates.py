"""What reading a framework release fdl's tables lack costs: the first reading (from its
crates in cargo's registry cache) and the cached one (fdl's cache entry), in bytes read and
seconds, for the library call and for ``fdl setup --dry-run --json``.

Usage: python bench/framework_crates.py [DIR]
DIR holds real crates (``torch-sys-0.26.0.crate``, ``flodl-cli-0.8.0.crate``,
``flodl-sys-0.8.0.crate``; default /tmp/crates), repacked here as release 0.99.0, which
no table knows; without them, the tests' small synthetic crates. Prints a table; asserts
nothing.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import print_table  # noqa: E402
from tests.support.fake_crates import (  # noqa: E402
    TORCH_SYS_BUILD,
    crate,
    flodl_files,
    put_in_cache,
)

REAL = {"tch": [("torch-sys", "0.26.0")], "flodl": [("flodl-cli", "0.8.0"), ("flodl-sys", "0.8.0")]}
UNSEEN = "0.99.0"
RUNS = 5


def _repack(path: Path, name: str, old: str) -> bytes:
    """The crate at ``path`` with its top directory renamed to ``<name>-0.99.0``."""
    out = io.BytesIO()
    with tarfile.open(path) as source, tarfile.open(fileobj=out, mode="w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member) if member.isreg() else None
            member.name = member.name.replace(f"{name}-{old}", f"{name}-{UNSEEN}", 1)
            target.addfile(member, data)
    return out.getvalue()


def _crates(framework: str, real: Path) -> tuple[dict[str, bytes], str]:
    if all((real / f"{n}-{v}.crate").is_file() for n, v in REAL[framework]):
        packed = {n: _repack(real / f"{n}-{v}.crate", n, v) for n, v in REAL[framework]}
        return packed, "real " + ", ".join(f"{n} {v}" for n, v in REAL[framework])
    if framework == "tch":
        files = {"torch-sys": {"build.rs": TORCH_SYS_BUILD.format(torch="2.13.0", cxx=17)}}
    else:
        files = flodl_files("2.10.0", 17)
    return {n: crate(n, UNSEEN, f) for n, f in files.items()}, "synthetic"


def _library(framework: str, root: Path) -> list[list[object]]:
    from fdl.compat import framework as table
    from fdl.libtorch import read_framework_release

    rows: list[list[object]] = []
    title = table(framework).title
    first = read_framework_release(framework, title, UNSEEN, home=root / "cargo")
    assert first is not None and not first.cached
    rows.append(
        [f"{framework} library", "first (crates)", first.bytes_read, f"{first.seconds:.4f}"]
    )
    best, size = float("inf"), 0
    for _ in range(RUNS):
        start = time.perf_counter()
        again = read_framework_release(framework, title, UNSEEN, home=root / "cargo")
        best = min(best, time.perf_counter() - start)
        assert again is not None and again.cached
        size = again.bytes_read
    rows.append([f"{framework} library", f"cached (best of {RUNS})", size, f"{best:.4f}"])
    return rows


def _cli(framework: str, root: Path, env: dict[str, str]) -> list[list[object]]:
    project = root / "proj"
    project.mkdir(exist_ok=True)
    (project / "fdl.yml").write_text("name: bench\n", encoding="utf-8")
    crate_name = "torch-sys" if framework == "tch" else "flodl"
    (project / "Cargo.lock").write_text(
        f'version = 4\n\n[[package]]\nname = "{crate_name}"\nversion = "{UNSEEN}"\n',
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "fdl", "setup", "--dry-run", "--json"]
    rows: list[list[object]] = []
    for label in ("first (crates)", "cached"):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=project, env=env, capture_output=True, check=False)
        spent = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(done.stderr.decode()[-600:])
        rows.append([f"{framework} fdl setup --dry-run", label, "", f"{spent:.3f}"])
    return rows


def main(real: Path) -> None:
    rows: list[list[object]] = []
    kinds: list[str] = []
    for framework in ("tch", "flodl"):
        with tempfile.TemporaryDirectory() as temporary:
            root = Path(temporary)
            packed, kind = _crates(framework, real)
            kinds.append(f"{framework}: {kind}")
            for name, data in packed.items():
                put_in_cache(root / "cargo", name, UNSEEN, data)
            os.environ["FDL_CACHE_DIR"] = str(root / "cache")
            rows += _library(framework, root)
            # the command, with a cache of its own (its first run reads the crates)
            env = {
                **os.environ,
                "PYTHONPATH": str(REPO),
                "CARGO_HOME": str(root / "cargo"),
                "FDL_CACHE_DIR": str(root / "cli-cache"),
                "FDL_HOME": str(root / "home"),
                "FDL_NVML": "0",
            }
            rows += _cli(framework, root, env)
    print(f"crates: {'; '.join(kinds)}; release {UNSEEN}")
    print_table(["what", "reading", "bytes read", "seconds"], rows)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/crates"))
