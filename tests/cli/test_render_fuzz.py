"""Hostile values into every renderer, hostile paths into every `-o` target.

Renderers: a string field of `images`, `deploy`, `ci` or `bench`, drawn from the schema
(so a new field is fuzzed as soon as it is declared), gets a hostile payload: a line break
followed by an instruction, a carriage return, a Unicode line separator, an escape
sequence, a GitHub expression, a token-shaped secret, a `!secret` value. Every command that
renders or writes from it runs (`image render` and `-o`, `deploy render`/`--json`/`submit
--dry-run --json`, `ci matrix --json`, `ci generate`, `bench run --dry-run`/`--json`).
Each ends in a documented exit code; no rendered byte and no written file holds an
injected line, an escape character, the expression or the secret.

Targets: `image render -o`, `ci generate -o`, `config schema -o`, `bench run -o` and
`bench report --plot` get a FIFO, a device, /proc, /sys, a file of the user's (a decoy, whose
bytes must stay), a link to it, a path under a file, a missing nested path. Each ends in a
documented exit code, and a decoy is never changed.

Every case runs in-process under a time bound (SIGALRM: a hang fails the case instead of
the suite) and a memory bound (the process's peak RSS). Derandomized.
"""

from __future__ import annotations

import itertools
import os
import re
import resource
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdl.manifest.schema import ListOf, MapOf, Obj, OneOf, Spec, Str
from fdl.manifest.sections import root_spec
from tests.support.images import make_project, make_variant

DOCUMENTED = {0, 1, 2, 3, 4, 5}
CASE_SECONDS = 60
PEAK_RSS_BYTES = 3 << 30
HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
TOKEN = "ghp_" + "Q7w8E9r0T1" * 4
PLAIN_SECRET = "plain-secret-4711-value"
PAYLOADS = {
    "newline": "x\nRUN touch /PWN",
    "crlf": "x\r\nRUN touch /PWN",
    "separator": "x\u2028RUN touch /PWN",
    "escape": "\x1b[2Jx",
    "expression": "${{ github.event.head_commit.message }}",
    "token": TOKEN,
    "secret": PLAIN_SECRET,  # written with the !secret tag
}
BASE: dict[str, Any] = {
    "images": {"train": {}},
    "deploy": {
        "s": {"kind": "slurm", "registry": "127.0.0.1:5000/x", "gpus-per-node": 1,
              "gpus": [{"type": "h100", "capability": "9.0"}]},
        "k": {"kind": "kubernetes", "gpus-per-node": 1,
              "gpus": [{"product": "H100", "capability": "9.0"}]},
    },
    "ci": {"variants": ["cpu"], "registry": "ghcr.io/acme"},
    "bench": {"b": {"run": ["true"], "rounds": 1}},
}  # fmt: skip
COMMANDS = [
    ["image", "render"],
    ["image", "render", "-o", "out"],
    ["deploy", "render", "s"],
    ["deploy", "render", "k", "--json"],
    ["deploy", "submit", "s", "--dry-run", "--json"],
    ["ci", "matrix", "--json"],
    ["ci", "generate"],
    ["bench", "run", "--dry-run"],
    ["bench", "run", "--dry-run", "--json"],
]


def _string_paths(spec: Spec, prefix: tuple[str, ...], depth: int = 0) -> Iterator[tuple[str, ...]]:
    """Paths to every string field under ``spec`` (map keys: "K", list items: 0)."""
    if depth > 5:
        return
    if isinstance(spec, Str):
        yield prefix
    elif isinstance(spec, Obj):
        for key, child in spec.fields.items():
            yield from _string_paths(child, (*prefix, key), depth + 1)
    elif isinstance(spec, MapOf):
        yield from _string_paths(spec.value, (*prefix, "K"), depth + 1)
    elif isinstance(spec, ListOf):
        yield from _string_paths(spec.item, (*prefix, "0"), depth + 1)
    elif isinstance(spec, OneOf):
        for option in spec.options:
            yield from _string_paths(option, prefix, depth + 1)


def _paths() -> list[tuple[str, ...]]:
    root = root_spec().fields
    found: set[tuple[str, ...]] = set()
    for section, first in (("images", "train"), ("deploy", "s"), ("deploy", "k"), ("bench", "b")):
        found.update(_string_paths(root[section].value, (section, first)))  # type: ignore[attr-defined]
    found.update(_string_paths(root["ci"], ("ci",)))
    return sorted(found)


PATHS = _paths()


def _placed(path: tuple[str, ...], value: object) -> dict[str, Any]:
    """BASE with ``value`` at ``path`` (lists made of one item)."""
    data = yaml.safe_load(yaml.safe_dump(BASE))
    node: Any = data
    for key, following in itertools.pairwise(path):
        child = [] if following == "0" else {}
        if isinstance(node, list):
            node.append(child)
            node = child
            continue
        if not isinstance(node.get(key), (dict, list)):
            node[key] = child
        node = node[key]
    if isinstance(node, list):
        node.append(value)
    else:
        node[path[-1]] = value
    return data


class _Secret(str):
    """A string dumped with the !secret tag."""


yaml.SafeDumper.add_representer(
    _Secret, lambda dumper, value: dumper.represent_scalar("!secret", str(value))
)


@contextmanager
def _bounded(case: object) -> Iterator[None]:
    """Fail the case past CASE_SECONDS (a hang) or PEAK_RSS_BYTES."""

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"no answer within {CASE_SECONDS} s: {case}")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(CASE_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert peak < PEAK_RSS_BYTES, (case, peak)


def _written(project: Path) -> Iterator[tuple[Path, bytes]]:
    for path in project.rglob("*"):
        mine = path.name == "fdl.yml" or "libtorch" in path.relative_to(project).parts
        if path.is_file() and not path.is_symlink() and not mine:
            yield path, path.read_bytes()


def _injected(
    text: str, workflow: bool = True, rendered: bool = True, written: bool = False
) -> str | None:
    """What of an injection ``text`` shows, if any (the expression only matters in what
    GitHub reads: the CI files and what `fdl ci` prints)."""
    # What fdl prints splits at \r and \n (a terminal's lines; JSON keeps U+2028 in a
    # string); a written file at every line break a YAML 1.1 reader knows too.
    lines = text.splitlines() if written else re.split(r"\r\n|\r|\n", text)
    for line in lines if rendered else ():
        if line.lstrip().startswith("RUN touch /PWN"):
            return "an injected instruction"
    if "\x1b" in text:
        return "an escape character"
    if workflow and "head_commit" in text:
        return "the GitHub expression"
    if TOKEN in text or PLAIN_SECRET in text:
        return "the secret"
    return None


def render_case(run_fdl, root: Path, path: tuple[str, ...], payload: str) -> None:  # type: ignore[no-untyped-def]
    value = _Secret(PAYLOADS[payload]) if payload == "secret" else PAYLOADS[payload]
    manifest = yaml.safe_dump(_placed(path, value), allow_unicode=True)
    project = make_project(root, manifest)
    make_variant(project, "precompiled/cpu")
    env = {"FDL_HOME": str(root / "home"), "FDL_CACHE_DIR": str(root / "cache")}
    for command in COMMANDS:
        case = (path, payload, command)
        with _bounded(case):
            result = run_fdl(command, cwd=project, env=env)
        assert result.exit_code in DOCUMENTED, (case, result.output[-2000:])
        assert "internal error" not in result.output, (case, result.output[-2000:])
        # A refusal may quote the value it refuses (repr: escaped), never a secret.
        ok = result.exit_code == 0
        found = _injected(result.output, workflow=ok and command[0] == "ci", rendered=ok)
        assert found is None, (case, found, result.output[-2000:])
    for written, data in _written(project):
        workflow = ".github" in written.relative_to(project).parts
        found = _injected(data.decode("utf-8", errors="replace"), workflow, written=True)
        assert found is None, (path, payload, written, found)


RENDER = dict(path=st.sampled_from(PATHS), payload=st.sampled_from(sorted(PAYLOADS)))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(**RENDER)
def test_hostile_values_into_every_renderer(run_fdl, tmp_path_factory, path, payload) -> None:  # type: ignore[no-untyped-def]
    render_case(run_fdl, tmp_path_factory.mktemp("render"), path, payload)


@pytest.mark.slow
@settings(max_examples=700, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(**RENDER)
def test_hostile_values_into_every_renderer_many(run_fdl, tmp_path_factory, path, payload) -> None:  # type: ignore[no-untyped-def]
    render_case(run_fdl, tmp_path_factory.mktemp("render"), path, payload)


DECOY = b"# the user's own file: fdl must not change it\n"
TARGETS = [
    "fifo", "decoy", "link-to-decoy", "under-a-file", "new/nested/out", "dir", "fdl.yml",
    "/dev/null", "/dev/zero", "/dev/full", "/proc/self", "/proc/self/status", "/sys", "",
    "x" * 300,
]  # fmt: skip
OUTPUTS = [
    (["image", "render", "-o"], True),
    (["ci", "generate", "-o"], True),
    (["config", "schema", "-o"], False),
    (["bench", "run", "-o"], False),
    (["bench", "report", "out.jsonl", "--plot"], True),
]
BENCH = f"""\
images:
  train: {{}}
ci:
  variants: [cpu]
  registry: ghcr.io/acme
bench:
  b:
    run: [{sys.executable}, -c, "print('ms: 1')"]
    rounds: 1
    warmup: 0
    figures: {{ms: 'ms: ([0-9.]+)'}}
"""


def _target(project: Path, name: str) -> str:
    decoy = project / "decoy"
    decoy.write_bytes(DECOY)
    if name == "fifo":
        os.mkfifo(project / "fifo")
    elif name == "link-to-decoy":
        (project / "link-to-decoy").symlink_to(decoy)
    elif name == "under-a-file":
        return str(decoy / "x")
    elif name == "dir":
        (project / "dir").mkdir()
    return name


def output_case(run_fdl, root: Path, command: list[str], name: str) -> None:  # type: ignore[no-untyped-def]
    project = make_project(root, BENCH)
    make_variant(project, "precompiled/cpu")
    env = {"FDL_HOME": str(root / "home"), "FDL_CACHE_DIR": str(root / "cache")}
    if command[:2] == ["bench", "report"]:
        with _bounded("bench run"):
            assert run_fdl(["bench", "run", "-o", "out.jsonl"], cwd=project, env=env).exit_code == 0
    manifest = (project / "fdl.yml").read_bytes()
    target = _target(project, name)
    case = (command, name)
    with _bounded(case):
        result = run_fdl([*command, target], cwd=project, env=env)
    assert result.exit_code in DOCUMENTED, (case, result.output[-2000:])
    assert "internal error" not in result.output, (case, result.output[-2000:])
    assert (project / "decoy").read_bytes() == DECOY, case
    assert (project / "fdl.yml").read_bytes() == manifest, case


OUTPUT = dict(command=st.sampled_from([c for c, _ in OUTPUTS]), name=st.sampled_from(TARGETS))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(**OUTPUT)
def test_hostile_output_targets(run_fdl, tmp_path_factory, command, name) -> None:  # type: ignore[no-untyped-def]
    output_case(run_fdl, tmp_path_factory.mktemp("output"), command, name)


@pytest.mark.parametrize("command", [c for c, _ in OUTPUTS], ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.slow
def test_every_output_target(run_fdl, tmp_path, command, name) -> None:  # type: ignore[no-untyped-def]
    output_case(run_fdl, tmp_path, command, name)
