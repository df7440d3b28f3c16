"""A fuzzer of the registry client: ``fdl libtorch pull`` and ``install --from-registry``
against a hostile OCI registry on loopback (tests/support/hostile_registry.py), one case
per hostile input of issue 35 (points 2, 6, 7, 12, 13, 14): nested JSON, annotations of
the wrong shape, Bearer challenges without a usable realm, token replies that are not
objects, endless and trickled bodies and headers, a truncated tar, a link escape built
across layers, 300 layers, a 32 GiB layer, a gzip bomb, a tags Link loop, escape sequences
in the registry's text, malformed references.

Every case runs ``python -m fdl`` in its own session with ``FDL_NET_DEADLINE=3`` and an
address-space limit, and must end in its documented exit code (never 70) within 20 s,
print no escape character, peak under 400 MB, and leave nothing running in its process
group. The figures (cases, exits by code, slowest, peak) are printed (``-s``).
Cost: 42 cases at about 1 s each, 35 s to 2 min on two shared cores (marked slow).
"""

from __future__ import annotations

import collections
import copy
import gzip
import hashlib
import io
import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fdl.libtorch import VariantInfo, finish_info, variants
from fdl.libtorch.sources._push import push_variant
from fdl.paths import Context
from tests.conftest import REPO
from tests.support.hostile_registry import (
    HostileRegistry,
    Reply,
    answer,
    gzip_layer,
    hostile_registry,
    republish,
)
from tests.support.libtorch_trees import make_tree

pytestmark = pytest.mark.slow

TAG = "2.13.0-cpu"
TOKEN = "ghp_" + "A1b2C3d4" * 5
DEADLINE_S = 20.0
PEAK_KB = 400 * 1024
DOCUMENTED = {0, 1, 2, 3, 4, 5}
ANNOTATION = "dev.fdl.libtorch."


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileRegistry]:
    """The registry, holding an honest CPU variant pushed by fdl under ``TAG``."""
    home = tmp_path_factory.mktemp("builder")
    context = Context(home, project=False)
    name = "precompiled/cpu"
    path = make_tree(context.libtorch_dir / name, "2.13.0+cpu")
    info = VariantInfo(name=name, torch="2.13.0", source={"kind": "download"})
    variants.write_info(path, finish_info(path, info))
    with hostile_registry() as served:
        push_variant(context, name, served.repo, credentials=lambda _host: None, compression="gzip")
        yield served


def _deep(depth: int = 100_000) -> bytes:
    return b"[" * depth + b"]" * depth


def _annotate(registry: HostileRegistry, new_tag: str, key: str, value: str) -> str:
    """Republish with one annotation (and the same config label) changed."""

    def manifest(body: dict[str, Any]) -> None:
        body["annotations"][ANNOTATION + key] = value

    def config(conf: dict[str, Any]) -> None:
        conf["config"]["Labels"][ANNOTATION + key] = value

    republish(registry, TAG, new_tag, manifest=manifest, config=config)
    return new_tag


def _variant_field(registry: HostileRegistry, new_tag: str, field: str, value: Any) -> str:
    record = json.loads(registry.manifest(TAG)["annotations"][ANNOTATION + "variant"])
    record[field] = value
    return _annotate(registry, new_tag, "variant", json.dumps(record))


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.SYMTYPE, target
    return member, None


def _escape(registry: HostileRegistry) -> str:
    """Issue 35 point 12: each layer is safe alone; merged, lib/escape leaves the tree."""
    hops = [f"x{i}" for i in range(1, 25)]
    target = "../" + "/".join(hops) + "/" + "../" * 24 + "etc"
    first = gzip_layer([_link("libtorch/lib/escape", target)])
    second = gzip_layer([_link(f"libtorch/{hop}", ".") for hop in hops])
    republish(registry, TAG, "escape", layers=[first, second])
    return "escape"


def _truncated(registry: HostileRegistry) -> str:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        member = tarfile.TarInfo("libtorch/share/big.txt")
        data = b"x" * 10_000
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    tar = raw.getvalue()[:3000]
    layer = (gzip.compress(tar, mtime=0), "sha256:" + hashlib.sha256(tar).hexdigest())
    republish(registry, TAG, "truncated", layers=[layer])
    return "truncated"


def _bomb(registry: HostileRegistry) -> str:
    """A gzip of 100 MiB of zeros (a tar of one file), about 100 KB."""
    header = tarfile.TarInfo("libtorch/share/zeros")
    header.size = 100 << 20
    head = header.tobuf(tarfile.PAX_FORMAT)
    zeros = bytes(1 << 20)
    digest, packed = hashlib.sha256(head), io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as sink:
        sink.write(head)
        for _ in range(100):
            digest.update(zeros)
            sink.write(zeros)
        digest.update(bytes(1024))
        sink.write(bytes(1024))
    republish(registry, TAG, "bomb", layers=[(packed.getvalue(), "sha256:" + digest.hexdigest())])
    return "bomb"


def _layers(registry: HostileRegistry, count: int) -> str:
    blob, diff_id = gzip_layer([])
    republish(registry, TAG, f"layers{count}", layers=[(blob, diff_id)] * count)
    return f"layers{count}"


def _layer_field(registry: HostileRegistry, tag: str, key: str, value: Any) -> str:
    def manifest(body: dict[str, Any]) -> None:
        body["layers"][0][key] = value

    republish(registry, TAG, tag, manifest=manifest)
    return tag


def _challenge(value: str) -> Callable[[HostileRegistry], str]:
    def setup(registry: HostileRegistry) -> str:
        headers = {"WWW-Authenticate": value}
        registry.faults.append(answer("/manifests/", Reply(401, b"{}", headers), times=1))
        return TAG

    return setup


def _token(reply: Reply) -> Callable[[HostileRegistry], str]:
    def setup(registry: HostileRegistry) -> str:
        realm = f'Bearer realm="http://{registry.address}/token",service="reg"'
        headers = {"WWW-Authenticate": realm}
        registry.faults.append(answer("/manifests/", Reply(401, b"{}", headers), times=1))
        registry.faults.append(answer("/token", reply))
        return TAG

    return setup


def _fault(where: str, reply: Reply) -> Callable[[HostileRegistry], str]:
    def setup(registry: HostileRegistry) -> str:
        registry.faults.append(answer(where, reply))
        return TAG

    return setup


def _republished(new_tag: str, **changes: Any) -> Callable[[HostileRegistry], str]:
    def setup(registry: HostileRegistry) -> str:
        republish(registry, TAG, new_tag, **changes)
        return new_tag

    return setup


def _set_labels(value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(conf: dict[str, Any]) -> None:
        conf["config"]["Labels"] = value

    return edit


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[HostileRegistry], str]  # the tag to pull, or the whole reference
    exit_code: int
    says: str = ""  # in the output: the case ended where it should
    install: bool = False  # install --from-registry (tags) instead of pull (its warning)


ESC = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"
CASES = [
    Case("honest", lambda r: TAG, 0),
    # 2: the registry's text with escape sequences, printed
    Case("built-by escapes", lambda r: _annotate(r, "ansi", "built-by", ESC), 0,
         "\\x1b]0;pwned"),
    Case("error body escapes", _fault("/manifests/", Reply(404, json.dumps(
        {"errors": [{"code": ESC, "message": ESC}]}).encode())), 5),
    Case("content-type escapes", _fault("/manifests/", Reply(
        200, b"not json", {"Content-Type": ESC})), 4),
    # 6: shapes
    Case("manifest nested 100k", _republished("deep", manifest_body=_deep()), 4),
    Case("manifest a list", _republished("list", manifest_body=b"[]"), 4),
    Case("config nested 100k", _republished("cdeep", config_body=_deep()), 4),
    Case("config a string", _republished("cstr", config_body=b'"x"'), 4),
    Case("config Labels a list", _republished("labels", config=_set_labels([])), 4),
    Case("annotation nested 100k", lambda r: _annotate(r, "adeep", "variant", _deep().decode()), 4),
    Case("source a string", lambda r: _variant_field(r, "src", "source", "x"), 4),
    Case("extra a list", lambda r: _variant_field(r, "extra", "extra", [1]), 4),
    Case("bearer without realm", _challenge('Bearer service="reg"'), 5),
    Case("bearer empty realm", _challenge('Bearer realm=""'), 5),
    Case("bearer file realm", _challenge('Bearer realm="file:///etc/passwd"'), 5),
    Case("bearer ftp realm", _challenge('Bearer realm="ftp://127.0.0.1/t"'), 5),
    Case("bearer malformed realm", _challenge('Bearer realm="http://[::1"'), 5),
    Case("bearer unreachable realm", _challenge('Bearer realm="http://127.0.0.1:9/t"'), 5),
    Case("token a list", _token(Reply(200, b"[]")), 5),
    Case("token nested 100k", _token(Reply(200, _deep())), 5),
    Case("token endless", _token(Reply(200, b"x" * 65536, endless=True)), 5),
    Case("truncated tar", _truncated, 1),
    # 7: unbounded reads, trickles
    Case("manifest endless", _fault("/manifests/", Reply(200, b"[" * 65536, endless=True)), 5,
         "FDL_REGISTRY_MAX_BODY="),
    Case("error body endless", _fault("/manifests/", Reply(500, b"e" * 65536, endless=True)), 5,
         "FDL_REGISTRY_MAX_BODY="),
    Case("manifest trickled", _fault("/manifests/", Reply(200, b"{}" * 500, trickle=True)), 5,
         "within 3 s"),
    Case("headers trickled", _fault("/manifests/", Reply(
        raw_head=b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 2000 + b"\r\n\r\n", trickle=True)), 5, "within 3 s"),
    Case("layer trickled", lambda r: _fault(r.manifest(TAG)["layers"][0]["digest"], Reply(
        200, b"x" * 5000, trickle=True))(r), 5, "slower than"),
    # 12: a link out of the tree, built across layers
    Case("link escape across layers", _escape, 4, "resolves outside the variant"),
    # 13: digests and references
    Case("layer digest of g's", lambda r: _layer_field(r, "gs", "digest", "sha256:" + "g" * 64), 4),
    Case("config digest a path", _republished("cpath", manifest=lambda m: m["config"].update(
        digest="sha256:../../../v2/x")), 4),
    Case("reference with a token", lambda r: f"me:{TOKEN}@{r.repo}:{TAG}", 2, "docker login"),
    Case("tag with a newline", lambda r: f"{r.repo}:a\nb", 2),
    Case("tag:tag", lambda r: f"{r.repo}:{TAG}:{TAG}", 2),
    Case("digest of g's", lambda r: f"{r.repo}@sha256:{'g' * 64}", 2),
    # 14: limits
    Case("300 layers", lambda r: _layers(r, 300), 4, "FDL_REGISTRY_MAX_LAYERS="),
    Case("a 32 GiB layer", lambda r: _layer_field(r, "huge", "size", 32 << 30), 4,
         "FDL_REGISTRY_MAX_LAYER="),
    Case("gzip bomb", _bomb, 4, "FDL_REGISTRY_MAX_RATIO="),
    Case("tags Link to itself", _fault("/tags/list", Reply(200, b'{"tags":[]}', {
        "Link": '</v2/team/libtorch/tags/list?n=1000>; rel="next"'})), 4, "a page already read",
         install=True),
    # the lookup that setup, install and `ci pushed` share (find_shared): the newest tag of
    # the release is hostile, the honest one is taken
    Case("lookup: built-by escapes", lambda r: _annotate(r, "2.13.0-zz", "built-by", ESC), 0,
         "\\x1b]0;pwned", install=True),
    Case("lookup: source a string", lambda r: _variant_field(r, "2.13.0-zz", "source", "x"), 0,
         "{honest}", install=True),
    Case("tags nested 100k", _fault("/tags/list", Reply(200, _deep())), 4, "does not read",
         install=True),
    Case("tags endless", _fault("/tags/list", Reply(200, b"[" * 65536, endless=True)), 4,
         "more than 4194304 bytes", install=True),
]  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    code: int
    seconds: float
    peak_kb: int
    left_running: bool
    output: str


# fdl run as `python -m fdl` does, writing its own peak memory on the way out: the peak of the
# process's address space since exec (VmHWM). ru_maxrss from wait4 is not fdl's: it keeps
# the high-water mark of the forked copy of this test process from before exec, which is
# whatever this pytest worker has grown to.
WITH_PEAK = """
import os, sys
def peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return line.split()[1]
    return ""
code = 1
try:
    from fdl.cli import main
    code = main()
finally:
    with open(os.environ["FDL_TEST_PEAK_FILE"], "w") as out:
        out.write(peak())
raise SystemExit(code)
"""


def _run(args: list[str], root: Path, extra: dict[str, str]) -> Outcome:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    env.update(extra)
    env.update(
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
        FDL_HOME=str(root / "home"),
        FDL_CACHE_DIR=str(root / "cache"),
        DOCKER_CONFIG=str(root / "docker"),
        FDL_NET_DEADLINE="3",
        FDL_TEST_PEAK_FILE=str(root / "peak"),
    )
    (root / "docker").mkdir(parents=True)
    out = root / "output"
    started = time.monotonic()
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", WITH_PEAK, *args],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # Set from outside (preexec_fn is unsafe with the registry's threads): a runaway
        # read meets MemoryError (exit 70) instead of filling the machine.
        resource.prlimit(proc.pid, resource.RLIMIT_AS, (2 << 30, 2 << 30))
        timer = threading.Timer(DEADLINE_S * 2, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    try:
        os.killpg(proc.pid, 0)
        left = True
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        left = False
    written = root / "peak"
    reported = written.read_text() if written.exists() else ""
    # killed before it could say (the deadline's SIGKILL): wait4's figure, an upper bound
    peak_kb = int(reported) if reported.isdigit() else usage.ru_maxrss
    return Outcome(proc.returncode, seconds, peak_kb, left, out.read_text(errors="replace"))


def test_every_hostile_registry_case_ends_in_its_documented_exit(
    registry: HostileRegistry, tmp_path: Path
) -> None:
    honest = copy.deepcopy((registry.blobs, registry.manifests))
    # the honest variant is the one pulled (named as its pusher named it, so by its digest)
    honest_digest = "sha256:" + hashlib.sha256(registry.manifests[TAG][0]).hexdigest()
    cases = {case.name: case for case in CASES}
    outcomes: dict[str, Outcome] = {}
    for number, case in enumerate(CASES):
        registry.faults.clear()
        registry.blobs, registry.manifests = copy.deepcopy(honest)
        chosen = case.setup(registry)
        reference = chosen if "/" in chosen else f"{registry.repo}:{chosen}"
        args = ["libtorch", "pull", reference]
        extra = {}
        if case.install:
            args = ["libtorch", "install", "--from-registry", "--torch", "2.13.0"]
            extra["FDL_LIBTORCH_REGISTRY"] = registry.repo
        outcomes[case.name] = _run(args, tmp_path / f"case{number}", extra)
    by_code = collections.Counter(outcome.code for outcome in outcomes.values())
    slowest = max(outcomes.items(), key=lambda item: item[1].seconds)
    peak = max(outcomes.items(), key=lambda item: item[1].peak_kb)
    print(
        f"\nregistry fuzzer: {len(outcomes)} cases; exits by code "
        f"{dict(sorted(by_code.items()))}; slowest {slowest[0]!r} {slowest[1].seconds:.1f} s; "
        f"peak {peak[0]!r} {peak[1].peak_kb // 1024} MB"
    )
    wrong = {
        name: (outcome.code, outcome.output[-600:])
        for name, outcome in outcomes.items()
        if outcome.code != cases[name].exit_code
        or cases[name].says.replace("{honest}", honest_digest) not in outcome.output
        or outcome.code not in DOCUMENTED
        or outcome.seconds > DEADLINE_S
        or outcome.peak_kb > PEAK_KB
        or outcome.left_running
        or "\x1b" in outcome.output
        or TOKEN in outcome.output
        or "Traceback" in outcome.output
    }
    assert not wrong, wrong
