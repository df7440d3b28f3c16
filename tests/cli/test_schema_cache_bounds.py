"""The schema cache is used for every entry, and nothing it holds, nor anything a probe
prints, breaks or blocks help, dry runs or `fdl schema` (issue 24 part 4, issue 25).

Hang guards are the subprocess's timeout (a test that hangs fails), never a timed
assertion."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SCHEMA = json.dumps({"options": {"rounds": {"type": "int", "description": "how many rounds"}}})

TOOL = f"""#!/bin/sh
if [ "$1" = "--fdl-schema" ]; then
  echo '{SCHEMA}'
  exit 0
fi
echo "bench $*"
"""

GUARD = 60  # seconds: only a hang reaches it


def _project(root: Path, entry: str, *, compile_: bool) -> Path:
    (root / "fdl.yml").write_text("commands:\n  bench:\n    path: ./benchmarks/\n")
    bench = root / "benchmarks"
    bench.mkdir()
    (bench / "fdl.yml").write_text(
        f"entry: {entry}\n"
        + ("compile: true\n" if compile_ else "")
        + "commands:\n  quick: {options: {rounds: 1}}\n"
    )
    tool = bench / "run.sh"
    tool.write_text(TOOL)
    tool.chmod(0o755)
    return bench


def test_an_entry_that_is_not_cargo_is_asked_by_itself(run_fdl, tmp_path: Path) -> None:
    """floDl's benchmarks manifest (`entry: bash run.sh`, no `compile: true`) promises that
    `fdl bench --help` shows run.sh's flags: floDl's CLI probes such entries unasked, and
    so does fdl (issue 34, point 8)."""
    bench = _project(tmp_path, "sh run.sh", compile_=False)
    # a run does not ask it unasked: an entry that ignored the flag would run in full
    ran = run_fdl(["bench", "--rounds", "3"], cwd=tmp_path)
    assert ran.exit_code == 0, ran.output
    assert not (bench / ".fdl" / "schema-cache").exists()
    helped = run_fdl(["bench", "--help"], cwd=tmp_path)
    assert helped.exit_code == 0, helped.output
    assert "--rounds" in helped.stdout and "how many rounds" in helped.stdout
    assert (bench / ".fdl" / "schema-cache" / "benchmarks.json").is_file()
    (bench / ".fdl" / "schema-cache" / "benchmarks.json").unlink()
    refreshed = run_fdl(["bench", "--refresh-schema"], cwd=tmp_path)
    assert refreshed.exit_code == 0, refreshed.output
    helped = run_fdl(["bench", "--help"], cwd=tmp_path)
    assert helped.exit_code == 0, helped.output
    assert "--rounds" in helped.stdout and "how many rounds" in helped.stdout
    # and the options are checked against it (did-you-mean from the cached schema)
    typo = run_fdl(["bench", "--dry-run", "--roundz", "3"], cwd=tmp_path)
    assert typo.exit_code == 0 and "did you mean --rounds" in typo.stdout, typo.output


def _hostile(kind: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "deep":
        path.write_text("[" * 200_000 + "]" * 200_000)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()


@pytest.mark.parametrize("kind", ["deep", "fifo", "zero", "directory"])
def test_a_hostile_cache_breaks_nothing(fdl_process, tmp_path: Path, kind: str) -> None:
    bench = _project(tmp_path, "sh run.sh", compile_=True)
    cache = bench / ".fdl" / "schema-cache" / "benchmarks.json"
    _hostile(kind, cache)
    for args, code in (
        (["--help"], 0),
        (["bench", "quick", "--dry-run"], 0),
        (["schema", "list"], 0),
        (["schema", "clear"], 0),
    ):
        result = fdl_process(args, cwd=tmp_path, timeout=GUARD)
        assert result.exit_code == code, (kind, args, result.stdout, result.stderr)
        assert "internal error" not in result.stderr
    # clear removes a file or a link (never what it points at), and keeps a directory
    assert cache.is_dir() if kind == "directory" else not os.path.lexists(cache)
    assert Path("/dev/zero").exists()


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("never ends", "exec sleep 1000"),
        (
            "deep JSON",
            "python3 -c \"print('{\\\"options\\\": ' + '[' * 100000 + ']' * 100000 + '}')\"",
        ),
        ("endless output", "exec yes '{'"),
    ],
)
def test_a_probe_cannot_block_help(fdl_process, tmp_path: Path, kind: str, body: str) -> None:
    bench = _project(tmp_path, "sh probe.sh", compile_=True)
    (bench / "probe.sh").write_text(f'if [ "$1" = "--fdl-schema" ]; then {body}; fi\necho ran\n')
    result = fdl_process(["bench", "--help"], cwd=tmp_path, timeout=GUARD)
    assert result.exit_code == 0, (kind, result.stdout, result.stderr)
    assert "Usage" in result.stdout or "fdl bench" in result.stdout
    assert "using no schema" in result.output, result.output  # the note says what it did


def test_schema_clear_refuses_a_path(run_fdl, tmp_path: Path) -> None:
    _project(tmp_path, "sh run.sh", compile_=True)
    for name in ("../..", "..", "a/b", ""):
        result = run_fdl(["schema", "clear", name], cwd=tmp_path)
        assert result.exit_code == 2, (name, result.output)
        assert "not a command directory's name" in result.stderr


def test_a_fresh_cache_of_the_wrong_shape_is_not_used(tmp_path: Path) -> None:
    """A cache whose key matches (fdl wrote it, or someone copied the key) but whose schema
    does not pass the checks of an inline `schema:` is ignored, not crashed on."""
    from fdl.manifest import load_directory_manifest
    from fdl.tasks._probe import cached_schema, write_cache

    bench = _project(tmp_path, "sh run.sh", compile_=True)
    nested = load_directory_manifest(bench, env=None, schema=None)
    write_cache(nested, {"options": {"rounds": {"type": ["int"]}}, "args": 5}, "probe")
    assert cached_schema(nested) is None
    write_cache(nested, json.loads(SCHEMA), "probe")
    assert cached_schema(nested) == json.loads(SCHEMA)


def test_a_cargo_entry_waits_for_compile_or_refresh(run_fdl, tmp_path: Path) -> None:
    """A `cargo` entry would build to answer, so without `compile: true` it is not asked."""
    _project(tmp_path, "cargo run --release --", compile_=False)
    helped = run_fdl(["bench", "--help"], cwd=tmp_path)
    assert helped.exit_code == 0, helped.output
    assert "quick" in helped.stdout  # the manifest's own help is shown
    assert "--rounds" not in helped.stdout


def test_help_of_a_docker_entry_says_how_to_learn_its_flags(run_fdl, tmp_path: Path) -> None:
    """floDl's benchmarks run in compose service `bench`: help does not start a container
    to ask, but says the command that does (issue 34, point 8)."""
    bench = _project(tmp_path, "bash run.sh", compile_=False)
    text = (bench / "fdl.yml").read_text()
    (bench / "fdl.yml").write_text("docker: bench\n" + text)
    helped = run_fdl(["bench", "--help"], cwd=tmp_path)
    assert helped.exit_code == 0, helped.output
    assert "`fdl bench --refresh-schema` asks it" in helped.output
    assert "`bash run.sh --fdl-schema` in compose service bench" in helped.output
