"""Arguments reach the program byte for byte through the real shell and executor."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdl.manifest import load_manifest
from fdl.runner import SubprocessRunner
from fdl.tasks import execute, prepare
from tests.support.tasks_helpers import write

RECORD = """\
import json, os, sys
with open(os.environ["ARGV_OUT"], "w", encoding="utf-8", errors="surrogateescape") as out:
    json.dump(sys.argv[1:], out)
"""

# Anything a command line can carry: no NUL; valid UTF-8 (surrogates cannot be passed on).
WORD = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=16
)


def run_with(root: Path, words: list[str]) -> list[str]:
    manifest = load_manifest(root, environ={})
    invocation = prepare(manifest, "record", ["--", *words], environ=os.environ)
    assert invocation.plan is not None
    out = root / "argv.json"
    environ = {**os.environ, "ARGV_OUT": str(out)}
    assert execute(invocation.plan, runner=SubprocessRunner(), environ=environ) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(WORD.filter(lambda w: w != "--"), max_size=6))
def test_any_arguments_arrive_verbatim(tmp_path: Path, words: list[str]) -> None:
    root = write(
        tmp_path,
        {"record.py": RECORD, "fdl.yml": "commands:\n  record: {run: python3 record.py}\n"},
    )
    assert run_with(root, words) == words
