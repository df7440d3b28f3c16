"""Benchmark: how a second machine gets a libtorch variant, and which registry client to use.

One builder machine (its own FDL_HOME) holds a variant: the fake tree's libraries (sm_61 +
sm_120 fatbins) plus ``--size-mb`` MB of real ELF code taken from this machine's shared
libraries (so it compresses like libtorch does, not like random bytes). It is pushed to the
loopback registry with zstd and with gzip layers. Then, ``--runs`` times each, a second
machine (a fresh FDL_HOME, no docker on PATH) gets it:

- ``fdl libtorch pull`` of the zstd image and of the gzip image (a subprocess, CLI included);
- ``oras`` (the ORAS Python SDK, ``pip install oras``; left out when not installed) pulling
  the same tree pushed as an ORAS artefact (it gzips a directory into one layer) and
  extracting it;
- ``fdl.net.download`` of a zip of the same tree, the same size as the gzip layers, from a
  local HTTP server, then ``fdl.archive.safe_extract_zip`` (what ``fdl libtorch download``
  does);
- ``docker pull`` of the gzip image (only into docker's image store: no tree on disk), when
  an engine answers;
- building the fake PyTorch tree (``fdl libtorch build --cpu --native``, 4 units), once,
  unless ``--no-build`` (a real sm_61 + sm_120 build takes hours: fdl's estimate is ~2h 50m
  on 8 cores).

It prints three tables: getting the variant (median seconds, MB/s of the bytes moved),
bytes stored zstd vs gzip with the push times, and fdl's client against oras (push, pull;
both in this process, so without the ~0.3 s start of the fdl CLI the subprocess rows pay).

Usage: python bench/libtorch_share.py [--size-mb 64] [--runs 3] [--registry 127.0.0.1:5000]
                                      [--no-build] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import print_table  # noqa: E402
from fdl.archive import safe_extract_zip  # noqa: E402
from fdl.libtorch import VariantInfo, finish_info, push_variant, variants  # noqa: E402
from fdl.net import download  # noqa: E402
from fdl.paths import Context  # noqa: E402
from tests.support.libtorch_trees import make_tree  # noqa: E402

MB = 1 << 20


def filler(path: Path, size: int) -> None:
    """``size`` bytes of this machine's shared libraries, concatenated."""
    sources = sorted(Path("/usr/lib/x86_64-linux-gnu").glob("*.so*"))
    sources += sorted(Path(sys.base_prefix).rglob("*.so"))
    written = 0
    with path.open("wb") as out:
        for source in sources * 8:
            if written >= size or not source.is_file() or source.is_symlink():
                continue
            data = source.read_bytes()[: size - written]
            out.write(data)
            written += len(data)
    if written < size:
        raise SystemExit(f"only {written} bytes of shared libraries found for the filler")


def make_variant(home: Path, size: int) -> Path:
    context = Context(home, project=False)
    name = "builds/sm61-sm120"
    tree = make_tree(context.libtorch_dir / name, "2.10.0+cu129", cubins=(61, 120), cuda_needed=())
    filler(tree / "lib" / "libtorch_filler.so", size)
    info = VariantInfo(
        name=name, torch="2.10.0", cuda="12.9", source={"kind": "build", "recipe": "bench"}
    )
    variants.write_info(tree, finish_info(tree, info))
    return tree


def tree_bytes(tree: Path) -> int:
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def fdl_process(args: list[str], home: Path, cwd: Path) -> None:
    env = {
        "FDL_HOME": str(home),
        "FDL_CACHE_DIR": str(home / "cache"),
        "PATH": "/nonexistent",  # no docker, no anything: the second machine
        "PYTHONPATH": str(REPO),
        "HOME": str(home),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "fdl", *args], cwd=cwd, env=env, capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"fdl {' '.join(args)} failed: {proc.stderr.decode()[-600:]}")


def docker_up() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=30)
    return probe.returncode == 0


def oras_client(registry: str):
    try:
        import oras.client
    except ModuleNotFoundError:
        return None
    return oras.client.OrasClient(hostname=registry, insecure=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--registry", default=os.environ.get("FDL_TEST_REGISTRY", "127.0.0.1:5000"))
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fdl-share-bench-", dir=args.workdir))
    repo = f"{args.registry}/fdl-bench/libtorch-{uuid.uuid4().hex[:8]}"
    try:
        return run(args, work, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path, repo: str) -> int:
    builder = work / "builder"
    tree = make_variant(builder, args.size_mb * MB)
    raw = tree_bytes(tree)
    context = Context(builder, project=False)
    pushed = {}
    push_times = {}
    for method in ("zstd", "gzip"):
        start = time.perf_counter()
        pushed[method] = push_variant(
            context,
            "builds/sm61-sm120",
            repo,
            credentials=lambda _host: None,
            compression=method,
            tag=method,
        )
        push_times[method] = time.perf_counter() - start
    stored = {m: sum(layer.size for layer in r.layers) for m, r in pushed.items()}

    rows: dict[str, list[float]] = {}
    moved: dict[str, int] = {}

    def second_machine() -> Path:
        home = work / f"m-{uuid.uuid4().hex[:8]}"
        (home / "work").mkdir(parents=True)
        return home

    for method in ("zstd", "gzip"):
        label = f"fdl libtorch pull ({method})"
        moved[label] = stored[method]
        for _ in range(args.runs):
            home = second_machine()
            ref = pushed[method].reference
            rows.setdefault(label, []).append(
                timed(lambda h=home, r=ref: fdl_process(["libtorch", "pull", r], h, h / "work"))
            )
            shutil.rmtree(home)

    # The same pulls in this process: the registry client's own cost, without the CLI's.
    from fdl.libtorch import pull_variant

    for method in ("zstd", "gzip"):
        label = f"fdl pull_variant in-process ({method})"
        moved[label] = stored[method]
        for _ in range(args.runs):
            home = second_machine()
            rows.setdefault(label, []).append(
                timed(
                    lambda h=home, r=pushed[method].reference: pull_variant(
                        Context(h, project=False), r, credentials=lambda _h: None, cache=h / "c"
                    )
                )
            )
            shutil.rmtree(home)

    # The same tree as an ORAS artefact (oras tars and gzips the directory itself).
    oras = oras_client(args.registry)
    oras_push = None
    if oras is not None:
        target = f"{repo}:oras"
        oras_push = timed(
            lambda: oras.push(
                files=[str(tree)], target=target, disable_path_validation=True, quiet=True
            )
        )
        label = "oras pull (gzip tar, extract)"
        for _ in range(args.runs):
            out = work / f"oras-{uuid.uuid4().hex[:8]}"
            rows.setdefault(label, []).append(
                timed(lambda o=out: oras.pull(target=target, outdir=str(o)))
            )
            moved[label] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            shutil.rmtree(out)
        moved[label] = stored["gzip"]

    # A zip of the same tree from a local HTTP server (what fdl libtorch download does).
    served = work / "served"
    served.mkdir()
    archive = served / "libtorch.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(tree.rglob("*")):
            if path.is_file() and not path.is_symlink():
                out.write(path, f"libtorch/{path.relative_to(tree)}")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.faulty_http", str(served)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int((server.stdout.readline() if server.stdout else "PORT 0").split()[1])
        label = "HTTP archive (download + extract)"
        moved[label] = archive.stat().st_size
        for _ in range(args.runs):
            dest = work / f"zip-{uuid.uuid4().hex[:8]}"

            def get(d: Path = dest) -> None:
                download(f"http://127.0.0.1:{port}/libtorch.zip", d / "libtorch.zip")
                safe_extract_zip(d / "libtorch.zip", d / "tree", strip_prefix="libtorch")

            rows.setdefault(label, []).append(timed(get))
            shutil.rmtree(dest)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=30)

    if docker_up():
        label = "docker pull (gzip, image store only)"
        moved[label] = stored["gzip"]
        ref = pushed["gzip"].reference
        for _ in range(args.runs):
            subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, check=False)
            rows.setdefault(label, []).append(
                timed(
                    lambda: subprocess.run(
                        ["docker", "pull", "-q", ref], capture_output=True, check=True
                    )
                )
            )
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, check=False)

    if not args.no_build:
        from tests.support.build_helpers import copy_source

        home = second_machine()
        source = copy_source(home / "pytorch")
        env = {
            **os.environ,
            "FDL_HOME": str(home),
            "FDL_CACHE_DIR": str(home / "cache"),
            "FAKE_TORCH_UNITS": "4",
            "PYTHONPATH": str(REPO),
        }
        argv = [sys.executable, "-m", "fdl", "libtorch", "build", "--cpu", "--native"]
        argv += ["--source", str(source), "--no-flash-attention"]
        label = "build the fake tree (CPU, 4 units, once)"
        rows[label] = [
            timed(lambda: subprocess.run(argv, cwd=home, env=env, capture_output=True, check=True))
        ]
        moved[label] = 0

    print(f"tree: {raw / MB:.1f} MB; registry {args.registry}; {args.runs} runs (median)\n")
    table = []
    for label, times in rows.items():
        median = statistics.median(times)
        rate = f"{moved[label] / MB / median:.0f}" if moved[label] else "-"
        table.append([label, f"{median:.2f}", f"{moved[label] / MB:.1f}", rate])
    print_table(["second machine gets the variant", "seconds", "MB moved", "MB/s"], table)
    print()
    print_table(
        ["layers", "bytes stored", "of the tree", "push seconds"],
        [
            [m, f"{stored[m]:,}", f"{100 * stored[m] / raw:.1f}%", f"{push_times[m]:.2f}"]
            for m in ("zstd", "gzip")
        ],
    )
    print()
    client_rows = [["fdl (fdl.net.RegistryClient), gzip", f"{push_times['gzip']:.2f}",
                    f"{statistics.median(rows['fdl pull_variant in-process (gzip)']):.2f}",
                    "yes", "yes", "yes"]]  # fmt: skip
    if oras_push is not None:
        client_rows.append(["oras-py, gzip", f"{oras_push:.2f}",
                            f"{statistics.median(rows['oras pull (gzip tar, extract)']):.2f}",
                            "no", "no", "no"])  # fmt: skip
    print_table(["client", "push s", "pull s", "digest checked", "resumes", "zstd"], client_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
