"""Benchmark: a CPU libtorch out of the package index's CUDA wheel of torch, two ways.

- the CPU view, ``fdl libtorch install --from-wheel --cpu --torch V``: HTTP Range reads of
  the members a CPU program loads (libtorch_cpu.so and its closure, the headers, two
  NVIDIA runtime libraries);
- the whole wheel, ``fdl libtorch install --from-wheel --torch V``: ``pip download`` of the
  torch wheel and of the NVIDIA wheels it pins, what a user gets with pip (the same bytes
  as ``pip install torch``), unpacked into a variant.

Each runs cold (a fresh FDL_HOME, FDL_CACHE_DIR and PIP_CACHE_DIR), then warm (a fresh
FDL_HOME, the same caches). For each: the bytes downloaded as fdl counts them (the view's
``bytes_read``; for the whole wheel, the wheels pip saved in fdl's cache), the bytes this
machine received meanwhile (``/proc/net/dev``, every interface but ``lo``: a cross-check
that includes other traffic), the wall time, the installed tree, and the caches left on
disk. Everything is deleted at the end unless ``--keep``. The whole wheel's cold run
downloads about 4.5 GB, and needs about 20 GB of disk while it runs.

Usage: python bench/cpu_view.py [--torch 2.10.0] [--index-url URL] [--workdir DIR]
                                [--only view|wheel] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import print_table  # noqa: E402

MB = 1 << 20


@dataclass
class Row:
    """One install as measured."""

    how: str
    state: str
    downloaded: int
    received: int
    seconds: float
    tree: int
    tree_files: int
    caches: int
    note: str = ""


def received() -> int:
    """Bytes received on every network interface but loopback so far."""
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() != "lo" and fields.split():
            total += int(fields.split()[0])
    return total


def size_of(path: Path) -> tuple[int, int]:
    """Bytes and files under ``path`` (links not followed)."""
    total = files = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            item = Path(root) / name
            if item.is_file() and not item.is_symlink():
                total += item.stat().st_size
                files += 1
    return total, files


def wheels_in(path: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in path.rglob("*.whl")} if path.is_dir() else {}


def fdl(argv: list[str], work: Path, home: Path, cache: Path, pip_cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDL", "FLODL"))}
    env.update(
        FDL_HOME=str(home),
        FDL_CACHE_DIR=str(cache),
        PIP_CACHE_DIR=str(pip_cache),
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "fdl", "-q", "libtorch", "install", *argv, "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"fdl libtorch install {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout))


def measure(how: str, state: str, argv: list[str], work: Path, name: str) -> Row:
    """One install into ``work/<name>-home`` with the caches of ``work/<how>-*``."""
    key = how.split(maxsplit=1)[0]
    home = work / f"{key}-{name}-home"
    cache, pip_cache = work / f"{key}-cache", work / f"{key}-pip-cache"
    before = wheels_in(cache)
    rx = received()
    start = time.perf_counter()
    result = fdl(argv, work, home, cache, pip_cache)
    seconds = time.perf_counter() - start
    rx = received() - rx
    tree, files = size_of(Path(result["path"]))
    caches = size_of(cache)[0] + size_of(pip_cache)[0]
    view = result.get("extra", {}).get("cpu_view")
    if view is not None:
        downloaded = int(view["bytes_read"])
        note = f"{view['bytes_cached'] / MB:.1f} MiB from fdl's cache" if state == "warm" else ""
    else:
        after = wheels_in(cache)
        downloaded = sum(size for path, size in after.items() if path not in before)
        note = f"{len(after)} wheels in fdl's cache"
    shutil.rmtree(home)  # the tree is measured; the next run gets a fresh FDL_HOME
    return Row(how, state, downloaded, rx, seconds, tree, files, caches, note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--torch", default="2.10.0", help="torch release (default 2.10.0)")
    parser.add_argument("--index-url", help="package index (default: $PIP_INDEX_URL, else PyPI)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the trees go")
    parser.add_argument("--only", choices=["view", "wheel"], help="measure one of the two")
    parser.add_argument("--keep", action="store_true", help="keep the caches afterwards")
    args = parser.parse_args(argv)
    index = ["--index-url", args.index_url] if args.index_url else []
    ways = [
        ("CPU view", ["--from-wheel", "--cpu", "--torch", args.torch, *index]),
        ("whole wheel + NVIDIA wheels (pip)", ["--from-wheel", "--torch", args.torch, *index]),
    ]
    if args.only:
        ways = [w for w in ways if (w[0] == "CPU view") == (args.only == "view")]
    work = Path(tempfile.mkdtemp(prefix="fdl-bench-cpu-view-", dir=args.workdir))
    rows: list[Row] = []
    try:
        for how, install in ways:
            for state in ("cold", "warm"):
                print(f"{how}, {state} ...", file=sys.stderr, flush=True)
                rows.append(measure(how, state, install, work, state))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nA CPU libtorch of torch {args.torch} from the index's CUDA wheel\n")
    print_table(
        [
            "how",
            "run",
            "downloaded (fdl)",
            "received (net/dev)",
            "wall s",
            "tree",
            "files",
            "caches on disk",
            "note",
        ],
        [
            (
                r.how,
                r.state,
                f"{r.downloaded / MB:,.1f} MiB",
                f"{r.received / MB:,.1f} MiB",
                f"{r.seconds:.1f}",
                f"{r.tree / MB:,.0f} MiB",
                r.tree_files,
                f"{r.caches / MB:,.0f} MiB",
                r.note,
            )
            for r in rows
        ],
    )
    if args.keep:
        print(f"\nkept in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
