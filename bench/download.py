"""Benchmark: fdl's downloader against curl on loopback, and what a resume costs.

Generates a file of ``--size-mb`` MB in a temporary directory, serves it from a
separate process (tests/support/faulty_http.py: sendfile, Range, ETag), and
prints two tables:

1. throughput of ``curl`` (alone, and followed by ``sha256sum`` since fdl
   hashes while it downloads) and of ``fdl.net.download``; best of ``--runs``;
2. bytes on the wire when the connection drops at 50%: resumed within one
   call, and resumed by a second call after the first one gave up.

Usage: python bench/download.py [--size-mb 1024] [--runs 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fdl.errors import NetworkError  # noqa: E402
from fdl.net import RetryPolicy, download  # noqa: E402
from tests.support.faulty_http import Drop, FaultyServer, Truncate  # noqa: E402

MB = 1 << 20


def make_file(path: Path, size: int) -> None:
    block = os.urandom(4 * MB)
    with path.open("wb") as out:
        remaining = size
        while remaining > 0:
            # Vary each block a little so the file is not one repeated pattern.
            piece = os.urandom(16) + block[16 : min(len(block), remaining)]
            out.write(piece[:remaining])
            remaining -= len(piece[:remaining])


class Server:
    """The test server in its own process, so it does not share our GIL."""

    def __init__(self, directory: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.faulty_http", str(directory)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().split()[1])

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def close(self) -> None:
        self.proc.communicate(input="", timeout=30)


def timed(action) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def throughput_table(url: str, work: Path, runs: int) -> list[tuple[str, float]]:
    """Best time per tool; runs are interleaved so background writeback hits all alike."""
    out = work / "out.bin"

    def curl() -> None:
        subprocess.run(["curl", "-sS", "--fail", "-o", str(out), url], check=True)

    def curl_sha() -> None:
        curl()
        subprocess.run(["sha256sum", str(out)], check=True, capture_output=True)

    def fdl() -> None:
        download(url, out)

    tools = {
        "curl": curl,
        "curl + sha256sum": curl_sha,
        "fdl.net.download (sha256 while streaming)": fdl,
    }
    best = dict.fromkeys(tools, float("inf"))
    for _ in range(runs):
        for name, action in tools.items():
            for path in work.glob("out.bin*"):
                path.unlink()
            os.sync()  # start each run without dirty pages of the previous one
            best[name] = min(best[name], timed(action))
    return list(best.items())


def resume_table(source: Path, size: int, work: Path) -> list[tuple[str, int, int, str]]:
    rows = []
    half = size // 2
    with FaultyServer() as server:
        url = server.add_file("/big.bin", source)
        dest = work / "resumed.bin"

        server.script("/big.bin", Drop(after=half))
        result = download(url, dest, sleep=lambda _: None)
        first, second = server.requests_to("/big.bin")
        rows.append(
            (
                "drop at 50%, resumed in the same call",
                first.sent,
                second.sent,
                f"range {second.range}, {result.attempts} attempts",
            )
        )
        dest.unlink()

        server.clear_log()
        server.script("/big.bin", Truncate(send=half))
        with contextlib.suppress(NetworkError):
            download(url, dest, retry=RetryPolicy(attempts=1))
        before = server.sent("/big.bin")
        server.clear_log()
        result = download(url, dest)
        rows.append(
            (
                "first run gives up at 50%, second run resumes",
                before,
                result.bytes_transferred,
                f"resumed_from {result.resumed_from}",
            )
        )
        dest.unlink()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=1024, help="file size in MB (default 1024)")
    parser.add_argument("--runs", type=int, default=3, help="runs per tool; the best counts")
    parser.add_argument("--workdir", type=Path, default=None, help="where the temporary files go")
    args = parser.parse_args(argv)
    if shutil.which("curl") is None:
        print("curl is not installed", file=sys.stderr)
        return 1
    size = args.size_mb * MB
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="fdl-bench-") as tmp:
        work = Path(tmp)
        serve = work / "serve"
        serve.mkdir()
        source = serve / "big.bin"
        make_file(source, size)
        os.sync()
        server = Server(serve)
        try:
            rows = throughput_table(server.url("big.bin"), work, args.runs)
        finally:
            server.close()
        resume = resume_table(source, size, work)

    print(f"Download of {args.size_mb} MB over loopback (best of {args.runs} runs)\n")
    print(f"| {'tool':<42} | {'seconds':>8} | {'MB/s':>8} | {'vs curl':>8} |")
    print(f"|{'-' * 44}|{'-' * 10}|{'-' * 10}|{'-' * 10}|")
    curl_time = rows[0][1]
    for name, seconds in rows:
        print(
            f"| {name:<42} | {seconds:8.2f} | {size / MB / seconds:8.0f} | {curl_time / seconds:8.2f} |"
        )
    print(f"\nResume after a drop at 50% of {size} bytes\n")
    print(
        f"| {'scenario':<46} | {'bytes before drop':>17} | {'bytes after':>12} | {'after/size':>10} | detail"
    )
    print(f"|{'-' * 48}|{'-' * 19}|{'-' * 14}|{'-' * 12}|{'-' * 30}")
    for name, before, after, detail in resume:
        print(f"| {name:<46} | {before:17d} | {after:12d} | {after / size:10.3f} | {detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
