"""Manifest fuzzer: hostile manifests and overrides end in a documented exit code.

Each case writes an fdl.yml (valid-ish YAML, mutated bytes, deep nesting,
anchors, huge numbers, odd keys and tags), picks random ``--set`` options and
``FDL__`` variables, and runs fdl in process. Every run must end in 0-4 within
a time and memory bound; an error about the file must say ``fdl.yml:line:col``.
A few hundred cases run without ``slow``; ``-m slow`` runs thousands (derandomized: every
run tries the same cases). Set
``FDL_FUZZ_REPORT=path`` to get the figures (cases, exit codes) as JSON.
"""

from __future__ import annotations

import json
import os
import re
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DOCUMENTED = {0, 1, 2, 3, 4}
SECONDS = 5.0  # per case; ordinary cases take milliseconds
PEAK_BYTES = 200 * 1024 * 1024
FIGURES: Counter[str] = Counter()

KEYS = st.sampled_from(
    ["description", "commands", "libtorch", "images", "ci", "run", "append", "docker",
     "inherit-from", "variant", "cuda", "build", "archs", "jobs", "<<", "", "a.b", "é", "x" * 300]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["12.8", "1e9999", "-.inf", "0x" + "f" * 50, "0o777", "yes", "~"]),
)
TREES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.text(max_size=8)), inner, max_size=4),
    ),
    max_leaves=20,
)
SNIPPETS = st.sampled_from(
    [
        "a: &a [1, 2]\nb: *a\nc: {<<: *a}\n",
        "x: !append [1]\ny: !replace {a: 1}\nz: !secret s\nw: !!binary aGk=\nv: !foo 1\n",
        "n: " + "9" * 5000 + "\n",
        "n: 0x" + "f" * 4000 + "\n",
        "f: 1e400\ng: -1e400\nh: .nan\n",
        "d: " + "[" * 300 + "]" * 300 + "\n",
        "d: " + "{a: " * 250 + "1" + "}" * 250 + "\n",
        "a0: &a0 [1,1,1,1,1,1,1,1,1,1]\n"
        + "".join(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8)),
        "inherit-from: fdl.yml\n",
        "inherit-from: " + "y" * 300 + ".yml\n",
        "inherit-from: /dev/zero\n",
        "inherit-from: .\n",
        "---\na: 1\n---\nb: 2\n",
        "- 1\n- 2\n",
        "a: 1\na: 2\n",
        "? [a]\n: 1\n",
        "commands:\n  t: {run: echo, append: '-- x'}\n",
        "commands:\n  t: {}\n",
        "libtorch: {variant: ../../etc}\n",
        "'\\x00': 1\n",
        '"\\ud800": 1\n',
    ]
)


@st.composite
def manifests(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["tree", "snippet", "both"]))
    text = ""
    if kind in ("tree", "both"):
        tree = draw(st.dictionaries(KEYS, TREES, max_size=5))
        text += yaml.safe_dump(tree, allow_unicode=True, sort_keys=False)
    if kind in ("snippet", "both"):
        text += draw(SNIPPETS)
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(draw(st.integers(0, 4))):  # byte mutations
        op = draw(st.sampled_from(["flip", "insert", "delete"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        byte = draw(st.integers(0, 255))
        if op == "insert" or not data:
            data.insert(at, byte)
        elif op == "flip":
            data[at] = byte
        else:
            del data[at]
    if draw(st.booleans()):
        data = bytearray(draw(st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe"]))) + data
    return bytes(data)


OVERRIDE_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["[1", "{a: 1}", "!secret x", "*a", "9" * 5000, "a: b", "'"]),
    st.binary(max_size=6).map(os.fsdecode),
)
SET_KEYS = st.one_of(
    st.lists(KEYS.filter(bool), min_size=1, max_size=4).map(".".join),
    st.integers(1, 1200).map(lambda n: ".".join(["a"] * n)),
    st.text(max_size=10),
)
ENV_NAMES = st.one_of(
    st.lists(st.sampled_from(["COMMANDS", "T", "RUN", "LIBTORCH", "A_B", ""]), max_size=4).map(
        lambda parts: "FDL__" + "__".join(parts)
    ),
    st.integers(1, 1200).map(lambda n: "FDL__" + "__".join(["A"] * n)),
)
COMMANDS = st.sampled_from(
    [["config", "show"], ["config", "validate"], ["--help"], ["config", "show", "--json"]]
)


def run_case(run_fdl, root: Path, data: bytes, sets, envs, command) -> None:
    (root / "fdl.yml").write_bytes(data)
    args = [part for key, value in sets for part in ("--set", f"{key}={value}")]
    env = {name: value for name, value in envs if "\x00" not in name + value and "=" not in name}
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = run_fdl([*args, *command], cwd=root, env=env)
    finally:
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    FIGURES["cases"] += 1
    FIGURES[f"exit {result.exit_code}"] += 1
    context = f"{data[:300]!r} {args[:4]} {sorted(env)[:2]} {command}\n{result.output[-2000:]}"
    assert result.exit_code in DOCUMENTED, context
    assert elapsed < SECONDS, f"{elapsed:.1f} s: {context}"
    assert peak < PEAK_BYTES, f"{peak:,} bytes: {context}"
    assert "error: internal error" not in result.output, context
    if result.exit_code == 3 and "fdl.yml:" in result.output:
        assert re.search(r"fdl\.yml:\d+(:\d+)?", result.output), context


def _report() -> None:
    target = os.environ.get("FDL_FUZZ_REPORT")
    if target:
        Path(target).write_text(json.dumps(dict(FIGURES), indent=1, sort_keys=True))


CASE = dict(
    data=manifests(),
    sets=st.lists(st.tuples(SET_KEYS, OVERRIDE_TEXT), max_size=2),
    envs=st.lists(st.tuples(ENV_NAMES, OVERRIDE_TEXT), max_size=2),
    command=COMMANDS,
)
HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(**CASE)
def test_fuzzed_manifests_end_in_a_documented_exit_code(
    run_fdl, tmp_path: Path, data, sets, envs, command
) -> None:
    run_case(run_fdl, tmp_path, data, sets, envs, command)
    _report()


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(**CASE)
def test_fuzzed_manifests_many(run_fdl, tmp_path: Path, data, sets, envs, command) -> None:
    run_case(run_fdl, tmp_path, data, sets, envs, command)
    _report()
