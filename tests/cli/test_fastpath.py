"""The `config show` and `config explain` fast path agrees with the typer command, and start-up stays light."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.cli import try_fast_path
from fdl.cli._globals import parse_globals

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "manifest-project"

CASES = [
    ["config", "show"],
    ["config", "show", "--json"],
    ["config", "show", "--no-origin"],
    ["config", "show", "--show-secrets", "--env", "ci"],
    ["config", "show", "--env=gpu", "--json"],
    ["config", "show", "-e", "ci", "--no-origin"],
    ["--env", "gpu", "config", "show"],
    ["config", "explain"],
    ["config", "explain", "--json"],
    ["config", "explain", "commands.test", "--env", "ci"],
    ["config", "explain", "--env=gpu", "commands", "--show-secrets"],
    ["-e", "ci", "config", "explain", "commands.test.run", "--json"],
    ["config", "explain", "no.such.key"],
]


@pytest.mark.parametrize("args", CASES)
def test_fast_path_matches_the_typer_command(
    run_fdl, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    fast = run_fdl(args, cwd=FIXTURE)
    monkeypatch.setattr("fdl.cli.try_fast_path", lambda *a: None)
    slow = run_fdl(args, cwd=FIXTURE)
    assert (fast.exit_code, fast.stdout, fast.stderr) == (slow.exit_code, slow.stdout, slow.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show", "--help"],
        ["config", "show", "--bogus"],
        ["config", "show", "extra"],
        ["config", "explain", "--help"],
        ["config", "explain", "one", "two"],
        ["config", "explain", "--no-origin"],
        ["config", "explain", "--", "key"],
        ["config", "layers"],
        ["--help"],
    ],
)
def test_fast_path_declines_other_forms(args: list[str]) -> None:
    from fdl.cli._console import Console

    options, rest = parse_globals(args)
    assert try_fast_path(options, rest, Console()) is None


# `libtorch list|info` (fdl.cli._variant_view): in a project with two variants, one
# active (a variant.json, and an older tree with .arch only); outside any project
VARIANT_CASES = [
    ["libtorch", "list"],
    ["libtorch", "list", "--json"],
    ["libtorch", "info"],
    ["libtorch", "info", "--json"],
    ["libtorch", "info", "precompiled/cpu"],
    ["libtorch", "info", "--json", "precompiled/cu126"],
    ["libtorch", "info", "precompiled/nope"],
    ["libtorch", "info", "nope", "--json"],
    ["-e", "ci", "libtorch", "list"],
]


@pytest.fixture
def with_variants(tmp_path: Path) -> Path:
    from fdl.libtorch import VariantInfo
    from fdl.libtorch.variants import write_info
    from tests.support.libtorch_trees import make_tree

    project = tmp_path / "p"
    shutil.copytree(FIXTURE, project)
    lib = project / "libtorch" / "precompiled"
    make_tree(lib / "cpu", "2.10.0+cpu")
    (lib / "cpu" / ".arch").write_text("cuda=none\ntorch=2.10.0\narchs=cpu\n")
    make_tree(lib / "cu126", "2.10.0+cu126")
    info = VariantInfo(
        name="precompiled/cu126",
        torch="2.10.0",
        cuda="12.6",
        archs_found={"cubin": ["sm_80", "sm_90"], "ptx": ["sm_90"]},
        source={"kind": "archive", "url": "https://example.invalid/x.zip"},
    )
    write_info(lib / "cu126", info)
    (project / "libtorch" / ".active").write_text("precompiled/cu126")
    return project


@pytest.mark.parametrize("args", VARIANT_CASES)
@pytest.mark.parametrize("where", ["project", "outside"])
def test_variant_fast_path_matches_the_typer_command(
    run_fdl, monkeypatch: pytest.MonkeyPatch, with_variants: Path, args: list[str], where: str
) -> None:
    cwd = with_variants if where == "project" else with_variants.parent
    env = {"FDL_HOME": str(with_variants.parent / "home")}
    fast = run_fdl(args, cwd=cwd, env=env)
    monkeypatch.setattr("fdl.cli._variant_view.try_fast_path", lambda *a: None)
    slow = run_fdl(args, cwd=cwd, env=env)
    assert (fast.exit_code, fast.stdout, fast.stderr) == (slow.exit_code, slow.stdout, slow.stderr)
    if where == "project" and args[-1] == "list":
        assert "* precompiled/cu126" in fast.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["libtorch", "list", "--help"],
        ["libtorch", "list", "extra"],
        ["libtorch", "info", "a", "b"],
        ["libtorch", "info", "--bogus"],
        ["libtorch", "info", "--", "x"],
        ["libtorch", "verify"],
        ["libtorch"],
        ["--help", "libtorch", "list"],
    ],
)
def test_variant_fast_path_declines_other_forms(args: list[str]) -> None:
    from fdl.cli import _variant_view
    from fdl.cli._console import Console

    options, rest = parse_globals(args)
    assert _variant_view.try_fast_path(options, rest, Console()) is None


HEAVY = [
    "docker",
    "requests",
    "jinja2",
    "torch",
    "typer",
    "click",
    "rich",
    "pydantic",
    "platformdirs",
]
# What matters is behaviour: the heavy third-party packages stay unloaded on the fast
# commands (their time is measured by bench/cli_latency.py, not asserted here); which
# standard-library modules fdl's own code uses is not this test's business.
PROBE = """
import sys
from fdl.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
raise SystemExit(code)
"""


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["--version"], set()),
        (["version"], set()),  # issue 34 point 15: a version is instant
        (["version", "--json"], set()),
        (["--help"], set()),
        (["config", "show"], set()),
        (["config", "show", "--json", "--env", "ci"], set()),
        (["config", "explain"], set()),
        (["config", "explain", "commands.test", "--json"], set()),
        (["libtorch", "list"], set()),
        (["libtorch", "list", "--json"], set()),
    ],
)
def test_startup_does_not_load_heavy_modules(
    tmp_path: Path, args: list[str], allowed: set[str]
) -> None:
    project = tmp_path / "p"
    shutil.copytree(FIXTURE, project)
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")][-1]
    loaded = {m for m in line[len("HEAVY=") :].split(",") if m}
    assert loaded <= allowed, f"{args} loaded {sorted(loaded - allowed)}"
    if args == ["config", "show", "--json", "--env", "ci"]:
        assert json.loads(proc.stdout)["commands"]["test"]["run"] == "cargo test --release"


def test_version_reads_no_manifest(tmp_path: Path) -> None:
    """`fdl version` answers before the session: a broken manifest does not matter."""
    (tmp_path / "fdl.yml").write_text("commands: [\n", encoding="utf-8")
    probe = "import sys\nfrom fdl.cli import main\ncode = main(['version'])\n"
    probe += "print('MANIFEST=' + str('fdl.manifest' in sys.modules), file=sys.stderr)\n"
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.stdout.startswith("fdl "), proc.stderr
    assert "MANIFEST=False" in proc.stderr


GC_PROBE = """
import gc, sys
from fdl.cli import main
before = (gc.isenabled(), gc.get_freeze_count())
main(sys.argv[1:])
print("IN-PROCESS", before == (gc.isenabled(), gc.get_freeze_count()), file=sys.stderr)
"""
OWN_PROCESS_PROBE = """
import gc, sys, atexit
from fdl import cli
seen = []
real = cli._main
def spy(args, *, own_process):
    seen.append(gc.isenabled())
    code = real(args, own_process=own_process)
    seen.append(gc.isenabled())
    return code
cli._main = spy
code = cli.main()
print("OWN", seen, gc.get_freeze_count() > 0, file=sys.stderr)
raise SystemExit(code)
"""


@pytest.mark.parametrize("args", [["config", "show"], ["run", "--help"]])
def test_a_caller_keeps_its_garbage_collector(tmp_path: Path, args: list[str]) -> None:
    """main(argv) in a caller's process leaves its collector as it was; fdl's own process
    (argv from sys.argv) runs the short answers without it and turns it on for commands
    that may run long."""
    project = tmp_path / "p"
    shutil.copytree(FIXTURE, project)
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    inside = subprocess.run(
        [sys.executable, "-c", GC_PROBE, *args], cwd=project, env=env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert "IN-PROCESS True" in inside.stderr, inside.stderr
    own = subprocess.run(
        [sys.executable, "-c", OWN_PROCESS_PROBE, *args], cwd=project, env=env,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    long_running = args[0] == "run"
    assert f"OWN [False, {long_running}] True" in own.stderr, own.stderr
