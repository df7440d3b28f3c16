"""Hostile command lines end in a documented exit code, never 70, never a hang.

Each case picks a built-in command that only reads or plans (``--dry-run`` where the
command changes something), then hostile positional values and option values: empty,
huge, option-like, paths to a device, a FIFO, a directory, ``/proc``, unknown names. The
project has images, a deploy target, a benchmark and a CI matrix, so the values reach the
planners. Arguments cannot hold a NUL byte (execve cannot pass one), so none is drawn.
Derandomized: every run tries the same cases.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.images import make_project, make_variant

DOCUMENTED = {0, 1, 2, 3, 4, 5}
MANIFEST = """\
images:
  train: {}
deploy:
  lab: {kind: slurm, gpus-per-node: 1, gpus: [{type: h100, capability: "9.0"}]}
bench:
  b: {run: ["true"], rounds: 1}
ci:
  variants: [cpu]
"""
VALUES = st.one_of(
    st.text(max_size=12).filter(lambda text: "\x00" not in text),
    st.sampled_from(
        ["", "-", "--", "-x", "--json", "..", "/", "x" * 5000, "a\nb", "0", "-1",
         "99999999999999999999", "nan", "@x", "%s", "{}", "a.b.c",
         "/dev/zero", "/dev/full", "/dev/null", "/proc/self/status", "/etc/passwd",
         "fifo", "dir", "fdl.yml", "fdl.yml:1", "CMakeLists.txt", ".",
         "precompiled/cpu", "precompiled/../../x", "builds/x", "6.1;12.0", "12.0f", "99.9",
         "2.99.0", "2.13.0", "cu130", "cpu", "lab", "train", "b", "bash", "compiler",
         "downloads", "all", "libtorch.build.archs", "http://127.0.0.1:1/x",
         "file:///etc/passwd"]
    ),
)  # fmt: skip
# (command, flags, options taking a value, how many positional values at most)
COMMANDS = [
    (["config", "show"], ["--json", "--no-origin", "--show-secrets"], ["--env"], 0),
    (["config", "explain"], ["--json"], ["--env"], 1),
    (["config", "layers"], ["--json"], ["--env"], 0),
    (["config", "validate"], ["--all-envs"], ["--env"], 0),
    (["image", "render"], [], [], 1),
    (["ci", "matrix"], ["--json"], [], 0),
    (["ci", "generate", "--dry-run"], ["--force"], ["--output"], 0),
    (["ci", "check"], [], ["--output"], 0),
    (["libtorch", "list"], ["--json"], [], 0),
    (["libtorch", "info"], ["--json"], [], 1),
    (["libtorch", "remove", "--dry-run"], ["--json", "--yes"], [], 1),
    (["libtorch", "download", "--dry-run"],
     ["--cpu", "--json", "--force", "--no-activate", "--keep-archive"],
     ["--cuda", "--torch", "--path", "--name", "--mirror"], 0),
    (["libtorch", "build", "--dry-run"],
     ["--json", "--docker", "--native", "--ptx", "--no-flash-attention", "--cpu", "--offline",
      "--fetch-only", "--fresh", "--list-recipes"],
     ["--archs", "--cuda", "--torch", "--jobs", "--cache", "--recipe", "--source",
      "--base-image", "--name"], 0),
    (["deploy", "render"], ["--json"], [], 1),
    (["deploy", "submit", "--dry-run"], ["--json"], [], 1),
    (["deploy", "status"], ["--json"], [], 1),
    (["deploy", "cancel", "--dry-run"], ["--json"], [], 1),
    (["diagnose", "--no-docker"], ["--json", "--strict"], [], 0),
    (["setup", "--dry-run"], ["--json", "--force"], ["--torch", "--from-wheel"], 0),
    (["cache", "list"], ["--json"], [], 0),
    (["cache", "clean", "--dry-run"], ["--json"], [], 2),
    (["bench", "run", "--dry-run"], ["--json"], ["--output", "--rounds", "--clock"], 1),
    (["bench", "report"], ["--json", "--plot"], ["--run-id"], 1),
    (["bench", "compare"], ["--json"], [], 2),
    (["schema", "list"], ["--json"], [], 0),
    (["completions"], [], [], 1),
    (["init", "--dry-run"], ["--json", "--yes", "--example", "--force", "--update"],
     ["--template", "--mode", "--torch", "--gpus", "--driver"], 1),
]  # fmt: skip
HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    base, flags, options, positional = draw(st.sampled_from(COMMANDS))
    args = list(base)
    args += [draw(VALUES) for _ in range(draw(st.integers(0, positional)))]
    if flags:
        args += draw(st.lists(st.sampled_from(flags), max_size=2))
    for option in draw(st.lists(st.sampled_from(options), max_size=2)) if options else []:
        args += [option, draw(VALUES)]
    if draw(st.integers(0, 3)) == 0:  # one more than the command takes
        args.append(draw(VALUES))
    return args


def run_case(run_fdl, root, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    project = make_project(root, MANIFEST)
    make_variant(project, "precompiled/cpu")
    os.mkfifo(project / "fifo")
    (project / "dir").mkdir()
    env = {
        "FDL_HOME": str(root / "home"),
        "FDL_CACHE_DIR": str(root / "cache"),
        "FDL_NVML": "0",
        "PATH": "/usr/bin:/bin",
    }
    result = run_fdl(args, cwd=project, env=env)
    context = f"{args}\n{result.output[-3000:]}"
    assert result.exit_code in DOCUMENTED, context
    assert "internal error" not in result.output, context


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(args=command_lines())
def test_hostile_command_lines(run_fdl, tmp_path_factory, args) -> None:  # type: ignore[no-untyped-def]
    run_case(run_fdl, tmp_path_factory.mktemp("cli"), args)


@pytest.mark.slow
@settings(max_examples=2500, deadline=None, derandomize=True, suppress_health_check=HEALTH)
@given(args=command_lines())
def test_hostile_command_lines_many(run_fdl, tmp_path_factory, args) -> None:  # type: ignore[no-untyped-def]
    run_case(run_fdl, tmp_path_factory.mktemp("cli"), args)
