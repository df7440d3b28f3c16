"""The user's arguments travel as positional parameters of ``sh`` (issue 11).

Joined into one ``sh -c`` string they hit the kernel's limit for one argument
(128 kB on Linux); as ``sh -c 'script "$@"' sh ARGS...`` only the limit of the
whole command line applies, as for the program itself.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdl.manifest import load_manifest
from fdl.runner import SubprocessRunner
from fdl.tasks import execute, prepare, render_script
from tests.support.tasks_helpers import write

RECORD = """\
import json, os, sys
with open(os.environ["ARGV_OUT"], "w", encoding="utf-8", errors="surrogateescape") as out:
    json.dump(sys.argv[1:], out)
"""


def project(tmp_path: Path, spec: str = "{run: python3 record.py}") -> Path:
    return write(tmp_path, {"record.py": RECORD, "fdl.yml": f"commands:\n  record: {spec}\n"})


def run_with(root: Path, tail: list[str]) -> list[str]:
    invocation = prepare(load_manifest(root, environ={}), "record", tail, environ=os.environ)
    assert invocation.plan is not None
    out = root / "argv.json"
    environ = {**os.environ, "ARGV_OUT": str(out)}
    assert execute(invocation.plan, runner=SubprocessRunner(), environ=environ) == 0
    return json.loads(out.read_text(encoding="utf-8", errors="surrogateescape"))


def test_two_arguments_of_70_kb_each_arrive(tmp_path: Path) -> None:
    big = "a" * 70_000
    assert run_with(project(tmp_path), ["--", big, big]) == [big, big]


def test_thirty_thousand_arguments_arrive(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(30_000)]
    assert run_with(project(tmp_path), ["--", *words]) == words


@pytest.mark.parametrize(
    ("append", "tail", "expected"),
    [
        ("--release", ["--", "a", "b"], ["--release", "a", "b"]),
        ("-- --nocapture", ["--", "a"], ["a", "--", "--nocapture"]),
        ("-- --nocapture", ["--", "a", "--", "--exact"], ["a", "--", "--nocapture", "--exact"]),
        ("--release", ["--", "a", "--", "x y"], ["--release", "a", "--", "x y"]),
        ("--release --", ["--", "--", "x"], ["--release", "--", "x"]),
        ("-- --nocapture", [], ["--", "--nocapture"]),
    ],
)
def test_append_and_second_separator_placement_is_unchanged(
    tmp_path: Path, append: str, tail: list[str], expected: list[str]
) -> None:
    root = project(tmp_path, f"{{run: python3 record.py, append: '{append}'}}")
    assert run_with(root, tail) == expected


def test_big_arguments_before_a_runner_separator_arrive(tmp_path: Path) -> None:
    big = "b" * 70_000
    root = project(tmp_path, "{run: python3 record.py, append: '-- --nocapture'}")
    got = run_with(root, ["--", big, big, "--", "--exact"])
    assert got == [big, big, "--", "--nocapture", "--exact"]


def test_dry_run_is_exact_for_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    root = project(tmp_path)
    word = os.fsdecode(b"x\xffy'z")
    invocation = prepare(
        load_manifest(root, environ={}), "record", ["--dry-run", "--", word], environ=os.environ
    )
    assert invocation.plan is not None
    text = render_script(invocation.plan)
    assert "\ufffd" not in text
    assert "printf '\\377'" in text
    line = text.splitlines()[-1]
    # Pasted into sh, the line passes exactly the original bytes.
    out = root / "argv.json"
    environ = {**os.environ, "ARGV_OUT": str(out)}
    subprocess.run(["sh", "-c", line], cwd=root, env=environ, check=True)
    assert json.loads(out.read_text(encoding="utf-8", errors="surrogateescape")) == [word]
    assert shlex.split(line)[:3] == ["sh", "-c", 'python3 record.py "$@"']


APPENDS = st.sampled_from(["", "--release", "-- --nocapture", "--release --", "-a -- -b 'c d'"])
WORDS = st.lists(
    st.one_of(
        st.just("--"),
        st.text(
            alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=8,
        ),
    ),
    max_size=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(append=APPENDS, words=WORDS, no_append=st.booleans())
def test_positional_form_runs_what_the_shown_script_says(
    tmp_path: Path, append: str, words: list[str], no_append: bool
) -> None:
    """The script shown (arguments quoted in place, as before) and the argv that
    runs (arguments as "$@") pass the program the same words."""
    spec = "{run: python3 record.py" + (f", append: {json.dumps(append)}" if append else "") + "}"
    root = project(tmp_path, spec)
    tail = [*(["--no-append"] if no_append else []), "--", *words]
    invocation = prepare(load_manifest(root, environ={}), "record", tail, environ=os.environ)
    assert invocation.plan is not None
    out = root / "argv.json"
    environ = {**os.environ, "ARGV_OUT": str(out)}
    subprocess.run(["sh", "-c", invocation.plan.script], cwd=root, env=environ, check=True)
    shown = json.loads(out.read_text(encoding="utf-8"))
    assert run_with(root, tail) == shown
