"""Resolving commands through nested manifests and planning where they run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from fdl.errors import ManifestError, UsageError
from fdl.manifest import load_manifest
from fdl.runner import Completed
from fdl.tasks import Invocation, Kind, prepare, render_script
from fdl.tasks._contract import BASH_PROLOGUE
from tests.support.fakes import FakeRunner
from tests.support.tasks_helpers import fake_libtorch, write

HOST = {"FDL_IN_CONTAINER": "0", "FDL_COMPOSE": "docker-compose"}
V1 = FakeRunner(
    {("docker", "compose", "version"): Completed([], 1)},
    programs={"docker": "/usr/bin/docker", "docker-compose": "/usr/bin/docker-compose"},
)

FILES = {
    "fdl.yml": """\
        commands:
          greet: {run: echo hello, description: Say hello}
          test: {run: cargo test, append: "-- --nocapture"}
          dtest: {run: cargo test, docker: cuda}
          sub:
          other: {path: elsewhere}
          ghost:
        """,
    "docker-compose.yml": """\
        services:
          dev:
            image: x
            volumes: [".:/srv/proj"]
          lt:
            volumes:
              - .:/workspace
              - ${LIBTORCH_CPU_PATH:-./libtorch/precompiled/cpu}:/usr/local/libtorch:ro
          nomount:
            image: y
          cuda:
            image: z
            volumes: [".:/srv/proj"]
            deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all}]}}}
        """,
    "sub/fdl.yml": """\
        description: Training
        entry: python train.py
        schema:
          options:
            model: {type: string, choices: [mlp, lenet]}
          strict: true
        training: {epochs: 5}
        commands:
          quick: {description: Fast, options: {model: lenet}, training: {epochs: 1}}
          helper: {run: pwd}
          inbox: {run: pwd, docker: dev}
          deeper: {}
        """,
    "sub/deeper/fdl.yml": "entry: echo DEEP\n",
    "elsewhere/fdl.yml": """\
        commands:
          x: {run: echo x}
        """,
    "gpu/fdl.yml": """\
        entry: python gpu.py
        docker: dev
        """,
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write(tmp_path, FILES)


def plan_of(
    root: Path,
    words: list[str],
    environ: dict[str, str] | None = None,
    overlay: str | None = None,
) -> Invocation:
    manifest = load_manifest(root, env=overlay, environ={})
    return prepare(
        manifest,
        words[0],
        words[1:],
        environ={**HOST, **(environ or {})},
        overlay=overlay,
        runner=V1,
    )


SQ_ITS = "'it'\\''s'"  # it's, quoted for sh


def test_run_command_on_the_host(root: Path) -> None:
    invocation = plan_of(root, ["greet", "--", "a b", "$x"])
    plan = invocation.plan
    assert plan is not None and invocation.action == "run"
    # The arguments travel as positional parameters; the shown script quotes them in place.
    assert plan.argv == ("sh", "-c", 'echo hello "$@"', "sh", "a b", "$x")
    assert plan.args == ("a b", "$x")
    assert plan.script == "echo hello 'a b' '$x'"
    assert plan.cwd == root
    assert plan.environ({})["FDL_PROJECT_ROOT"] == str(root)
    assert str(plan.declared_at) == "fdl.yml:2:3"


def test_arguments_before_the_separator_are_an_error_with_the_right_form(root: Path) -> None:
    with pytest.raises(UsageError) as caught:
        plan_of(root, ["greet", "--fast", "x y"])
    assert caught.value.message == "`fdl greet` takes its arguments after `--` (got --fast 'x y')"
    assert caught.value.hint == "fdl greet -- --fast 'x y'"
    with pytest.raises(UsageError) as caught:  # fdl's own -q goes before the command
        plan_of(root, ["greet", "-q", "x y"])
    assert (caught.value.hint or "").startswith("`fdl -q greet -- 'x y'`")


def test_fdl_flags_only_before_the_separator(root: Path) -> None:
    assert plan_of(root, ["greet", "--help"]).action == "help"
    assert plan_of(root, ["greet", "--dry-run"]).action == "dry-run"
    forwarded = plan_of(root, ["greet", "--", "-v", "--help", "--env", "x", "-q"])
    assert forwarded.action == "run"
    assert forwarded.plan is not None
    assert forwarded.plan.script == "echo hello -v --help --env x -q"


def test_no_append_before_the_separator_only(root: Path) -> None:
    plan = plan_of(root, ["test", "--no-append", "--", "-p", "foo"]).plan
    assert plan is not None and plan.script == "cargo test -p foo"
    plan = plan_of(root, ["test", "--", "--no-append"]).plan
    assert plan is not None and plan.script == "cargo test --no-append -- --nocapture"


def test_nested_run_command_runs_in_its_directory(root: Path) -> None:
    plan = plan_of(root, ["sub", "helper"]).plan
    assert plan is not None and plan.cwd == root / "sub"
    plan = plan_of(root, ["other", "x"]).plan
    assert plan is not None and plan.cwd == root / "elsewhere"


def test_entry_with_defaults_preset_and_user_arguments(root: Path) -> None:
    plan = plan_of(root, ["sub", "--model", "mlp"]).plan
    assert plan is not None and plan.script == "python train.py --epochs 5 --model mlp"
    invocation = plan_of(root, ["sub", "quick", "--model", "mlp", "--", "--free", "x y"])
    assert invocation.resolution.kind is Kind.PRESET
    assert invocation.plan is not None
    assert invocation.plan.script == (
        "python train.py --epochs 1 --model lenet --model mlp --free 'x y'"
    )
    assert invocation.plan.cwd == root / "sub"


def test_schema_is_checked_before_anything_runs(root: Path) -> None:
    with pytest.raises(UsageError, match="did you mean --model"):
        plan_of(root, ["sub", "--modle", "x"])
    with pytest.raises(UsageError, match="allowed: mlp, lenet"):
        plan_of(root, ["sub", "quick", "--model", "vgg"])
    plan = plan_of(root, ["sub", "--", "--modle", "anything"]).plan
    assert plan is not None and plan.script.endswith("--modle anything")


def test_help_does_not_check_arguments(root: Path) -> None:
    invocation = plan_of(root, ["sub", "--help", "--bogus"])
    assert invocation.action == "help"
    assert invocation.plan is not None
    assert invocation.plan.script == "python train.py --epochs 5 [ARGS...]"


def test_deeper_nested_manifest(root: Path) -> None:
    plan = plan_of(root, ["sub", "deeper", "x"]).plan
    assert plan is not None
    assert (plan.script, plan.cwd) == ("echo DEEP x", root / "sub" / "deeper")


def test_group_without_entry_shows_help_and_rejects_unknown(root: Path) -> None:
    assert plan_of(root, ["other"]).resolution.kind is Kind.GROUP
    with pytest.raises(UsageError) as caught:
        plan_of(root, ["other", "xx"])
    assert caught.value.hint == "did you mean `fdl other x`?"


def test_missing_convention_directory_is_located(root: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        plan_of(root, ["ghost"])
    assert str(caught.value).startswith("fdl.yml:7:3: command 'ghost' refers to a nested manifest")


def test_docker_run_wraps_into_compose_with_cd_and_env(root: Path) -> None:
    variant = fake_libtorch(root)
    plan = plan_of(root, ["dtest", "--", "-p", "it's"]).plan
    assert plan is not None and plan.docker is not None
    assert plan.cwd == root
    argv = list(plan.argv)
    assert argv[:3] == ["docker-compose", "run", "--rm"]
    assert argv[-7:-3] == ["cuda", "sh", "-c", BASH_PROLOGUE]
    assert argv[-2:] == ["-p", "it's"]
    assert "-e" in argv and "LIBTORCH=/srv/proj/libtorch/precompiled/cu128" in argv
    assert "CUDA_VERSION=12.8.0" in argv and "FDL_PROJECT_ROOT=/srv/proj" in argv
    inner = argv[-3].splitlines()
    assert inner[0] == "cd /srv/proj || exit 125"
    assert inner[-1] == 'cargo test "$@"'
    assert plan.script.endswith("cargo test -p " + SQ_ITS)
    assert any(line.startswith("export LD_LIBRARY_PATH=/srv/proj/libtorch") for line in inner)
    host = plan.environ({})
    assert host["LIBTORCH_HOST_PATH"] == str(variant)
    assert host["CUDA_TAG"] == "12.8"


def test_nested_docker_commands_cd_to_their_directory_in_the_container(root: Path) -> None:
    plan = plan_of(root, ["sub", "inbox"]).plan
    assert plan is not None and plan.docker is not None
    assert plan.docker.container_dir == "/srv/proj/sub"
    assert plan.cwd == root  # compose runs where the compose file is
    plan = plan_of(root, ["gpu", "--x"]).plan
    assert plan is not None and plan.docker is not None
    assert plan.argv[-5:-2] == ("sh", "-c", BASH_PROLOGUE)
    assert plan.argv[-1:] == ("--x",)
    assert plan.argv[-2].splitlines()[0] == "cd /srv/proj/gpu || exit 125"
    assert plan.argv[-2].splitlines()[-1] == 'python gpu.py "$@"'


def test_explicitly_mounted_libtorch_is_what_the_container_sees(root: Path) -> None:
    fake_libtorch(root, "precompiled/cpu", cuda=None)
    fake_libtorch(root)  # active: cu128, but service `lt` mounts the CPU one
    write(root, {"fdl.yml": "commands:\n  t: {run: x, docker: lt}\n"})
    plan = plan_of(root, ["t"]).plan
    assert plan is not None and plan.docker is not None
    env = {c.name: c.value for c in plan.docker.env}
    assert env["LIBTORCH"] == "/usr/local/libtorch"
    assert "CUDA_VERSION" not in env


def test_unmounted_libtorch_is_a_note(root: Path) -> None:
    fake_libtorch(root)
    write(root, {"fdl.yml": "commands:\n  t: {run: x, docker: nomount}\n"})
    plan = plan_of(root, ["t"]).plan
    assert plan is not None and plan.docker is not None
    assert plan.docker.container_dir == "/workspace"
    assert any("not mounted into service 'nomount'" in note for note in plan.notes)
    assert any("has no bind mount" in note for note in plan.notes)


def test_unknown_service_is_located_at_docker(root: Path) -> None:
    write(root, {"fdl.yml": "commands:\n  t:\n    run: x\n    docker: ghost\n"})
    with pytest.raises(ManifestError) as caught:
        plan_of(root, ["t"])
    assert str(caught.value).startswith("fdl.yml:4:13: docker service 'ghost' is not defined")
    assert caught.value.hint == "services there: dev, lt, nomount, cuda"


def test_missing_compose_file(tmp_path: Path) -> None:
    write(tmp_path, {"fdl.yml": "commands:\n  t: {run: x, docker: dev}\n"})
    with pytest.raises(ManifestError, match=r"no compose\.yaml or docker-compose\.yml"):
        plan_of(tmp_path, ["t"])


def test_inside_a_container_docker_commands_run_directly(root: Path) -> None:
    plan = plan_of(root, ["dtest"], {"FDL_IN_CONTAINER": "1"}).plan
    assert plan is not None and plan.docker is None
    assert plan.argv == ("sh", "-c", "cargo test")
    assert any("already inside a container" in note for note in plan.notes)


def test_overlay_reaches_nested_manifests_and_children(root: Path) -> None:
    write(root, {"fdl.ci.yml": "description: ci\n", "sub/fdl.ci.yml": "entry: python ci.py\n"})
    plan = plan_of(root, ["sub"], overlay="ci").plan
    assert plan is not None
    assert plan.script.startswith("python ci.py ")
    assert plan.environ({})["FDL_ENV"] == "ci"


def test_dry_run_script_is_runnable_shell(root: Path) -> None:
    fake_libtorch(root)
    plan = plan_of(root, ["greet", "--dry-run", "--", "it's", ""]).plan
    assert plan is not None
    text = render_script(plan)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[0] == f"cd {root}"
    assert lines[-1] == "sh -c 'echo hello \"$@\"' sh " + SQ_ITS + " ''"
    assert shlex.split(lines[-1])[2:] == ['echo hello "$@"', "sh", "it's", ""]
