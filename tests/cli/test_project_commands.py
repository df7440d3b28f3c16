"""`fdl <command>` end to end: exit codes, argv, stdin, help (golden), dry runs, errors."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from fdl.tasks._contract import BASH_PROLOGUE
from tests.support.tasks_helpers import (
    ADVERSARIAL,
    PRINT_ARGV,
    assert_golden,
    fake_libtorch,
    last_json,
    normalize,
    write,
)

DETERMINISTIC = {"FDL_IN_CONTAINER": "0", "FDL_COMPOSE": "docker-compose"}

PROJECT = {
    "printargv.py": PRINT_ARGV,
    "fdl.yml": """\
        description: Demo project
        commands:
          greet:
            description: Say hello
            run: echo hello
          argv:
            description: Print the arguments as JSON
            run: python3 printargv.py
            append: --appended -- --after
          fail: {run: exit 3}
          killed: {run: kill -TERM $$}
          echo-stdin: {run: "read line; echo \\"got $line\\""}
          dtest:
            description: Tests in the dev container
            run: cargo test
            append: --release -- --nocapture
            docker: dev
          train:
          config: {run: echo project-config}
        """,
    "docker-compose.yml": """\
        services:
          dev:
            image: example-dev
            volumes:
              - .:/workspace
        """,
    "train/fdl.yml": """\
        description: Training runs
        entry: python3 ../printargv.py
        docker: dev
        arg-name: recipe
        schema:
          args:
            - {name: run-id, description: Run identifier, required: false}
          options:
            model: {type: string, choices: [mlp, lenet, resnet], short: m, default: mlp, description: Model to run}
            data: {type: path, env: DATA_DIR, description: Data directory}
            tags: {type: "list[string]", description: Tags}
          strict: true
        training: {epochs: 5, seed: 42}
        commands:
          quick:
            description: Fast smoke test
            options: {model: lenet}
            training: {epochs: 1}
          where: {description: Print the directory, run: pwd}
          local: {run: python3 ../printargv.py}
        """,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = write(tmp_path / "proj", PROJECT)
    fake_libtorch(root)
    return root


def test_exit_codes_pass_through(project: Path, fdl_process) -> None:
    assert fdl_process(["greet"], cwd=project).exit_code == 0
    assert fdl_process(["fail"], cwd=project).exit_code == 3
    assert fdl_process(["killed"], cwd=project).exit_code == 128 + 15


def test_adversarial_arguments_reach_the_program_verbatim(project: Path, fdl_process) -> None:
    result = fdl_process(["argv", "--", *ADVERSARIAL], cwd=project)
    assert result.exit_code == 0, result.stderr
    cut = ADVERSARIAL.index("--")  # the user's second `--` goes after append's own
    before, after = ADVERSARIAL[:cut], ADVERSARIAL[cut + 1 :]
    expected = ["--appended", *before, "--", "--after", *after]
    assert last_json(result.stdout)["argv"] == expected


def test_second_separator_splits_runner_arguments(project: Path, fdl_process) -> None:
    result = fdl_process(["argv", "--", "-p", "foo bar", "--", "--ignored", "'"], cwd=project)
    assert last_json(result.stdout)["argv"] == [
        "--appended",
        "-p",
        "foo bar",
        "--",
        "--after",
        "--ignored",
        "'",
    ]


def test_global_looking_flags_after_the_command_belong_to_it(project: Path, fdl_process) -> None:
    args = ["-v", "-q", "--env", "x", "--help", "-h", "--dry-run", "--no-append"]
    result = fdl_process(["argv", "--", *args], cwd=project)
    assert result.exit_code == 0, result.stderr
    assert last_json(result.stdout)["argv"] == ["--appended", *args, "--", "--after"]


def test_stdin_passes_through(project: Path) -> None:
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "fdl", "echo-stdin"],
        cwd=project,
        input="hello there\n",
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "got hello there\n")


def test_host_commands_get_the_libtorch_environment(project: Path, fdl_process) -> None:
    result = fdl_process(["argv"], cwd=project, env={"LD_LIBRARY_PATH": "/usr/local/lib"})
    env = last_json(result.stdout)["env"]
    variant = str(project / "libtorch" / "precompiled" / "cu128")
    assert env["LIBTORCH"] == env["LIBTORCH_PATH"] == variant
    assert env["LD_LIBRARY_PATH"] == f"{variant}/lib:/usr/local/lib"
    assert env["CMAKE_PREFIX_PATH"].split(":")[0] == variant
    assert env["Torch_DIR"] == f"{variant}/share/cmake/Torch"
    assert (env["CUDA_VERSION"], env["CUDA_TAG"]) == ("12.8.0", "12.8")
    assert env["FDL_PROJECT_ROOT"] == str(project)


def test_nested_commands_run_in_their_directory_with_overlay(project: Path, fdl_process) -> None:
    result = fdl_process(["train", "where"], cwd=project / "train")
    assert result.stdout.strip() == str(project / "train")
    write(project, {"fdl.ci.yml": "description: ci\n"})
    result = fdl_process(["--env", "ci", "train", "local", "--", "x"], cwd=project)
    data = last_json(result.stdout)
    assert (data["argv"], data["cwd"], data["env"]["FDL_ENV"]) == (
        ["x"],
        str(project / "train"),
        "ci",
    )


def test_entry_runs_with_settings_and_checked_arguments(project: Path, fdl_process) -> None:
    env = {"FDL_IN_CONTAINER": "1", "DATA_DIR": "/data"}  # as if already in the container
    result = fdl_process(
        ["train", "quick", "-m", "resnet", "--", "--free", "a b"], cwd=project, env=env
    )
    assert result.exit_code == 0, result.stderr
    assert last_json(result.stdout)["argv"] == [
        "--epochs",
        "1",
        "--seed",
        "42",
        "--model",
        "lenet",
        "-m",
        "resnet",
        "--data",
        "/data",
        "--free",
        "a b",
    ]


def test_arguments_before_separator_are_an_error(project: Path, run_fdl) -> None:
    result = run_fdl(["greet", "extra", "it's"], cwd=project)
    assert result.exit_code == 2
    assert (
        "error: `fdl greet` takes its arguments after `--` (got extra 'it'\"'\"'s')"
        in result.stderr
    )
    assert "fix: fdl greet -- extra 'it'\"'\"'s'" in result.stderr


def test_unknown_flag_in_strict_schema_with_did_you_mean(project: Path, run_fdl) -> None:
    result = run_fdl(["train", "--modl", "x"], cwd=project, env=DETERMINISTIC)
    assert result.exit_code == 2
    assert "unknown option --modl for `train`; did you mean --model?" in result.stderr


def test_unknown_command_suggests(project: Path, run_fdl) -> None:
    result = run_fdl(["gret"], cwd=project)
    assert result.exit_code == 2
    assert "did you mean `fdl greet`?" in result.stderr


def test_kind_errors_stop_every_command_with_their_location(project: Path, run_fdl) -> None:
    write(project, {"fdl.yml": "commands:\n  greet: {run: echo hi}\n  bad:\n    docker: dev\n"})
    result = run_fdl(["greet"], cwd=project)
    assert result.exit_code == 3
    assert (
        "fdl.yml:4:13: commands.bad.docker: command 'bad' has `docker:` but no `run:`"
        in result.stderr
    )


def test_broken_manifest_is_reported_not_swallowed(project: Path, run_fdl) -> None:
    write(project, {"fdl.yml": "commands:\n  greet: {run: echo hi\n"})
    result = run_fdl(["greet"], cwd=project)
    assert result.exit_code == 3
    assert "fdl.yml:" in result.stderr and "unknown command" not in result.stderr


def test_nested_manifest_errors_name_the_nested_file(project: Path, run_fdl) -> None:
    write(project, {"train/fdl.yml": "entry: x\ntraining: {epochs: five}\n"})
    result = run_fdl(["train"], cwd=project)
    assert result.exit_code == 3
    assert "train/fdl.yml:2:20: training.epochs: expected an integer" in result.stderr


def test_missing_compose_program_is_an_environment_problem(
    project: Path, run_fdl, tmp_path: Path
) -> None:
    from tests.support.fake_docker import make_fake_docker

    fake = make_fake_docker(tmp_path / "bin", version="20.10.24", compose=False)
    env = {"FDL_IN_CONTAINER": "0", "PATH": str(fake.folder), "FDL_DOCKER": ""}
    result = run_fdl(["dtest"], cwd=project, env=env)
    assert result.exit_code == 4
    assert "`docker compose`" in result.stderr and "`docker-compose`" in result.stderr


def test_no_docker_at_all_is_an_environment_problem(project: Path, run_fdl) -> None:
    result = run_fdl(["dtest"], cwd=project, env={"FDL_IN_CONTAINER": "0", "PATH": "/nonexistent"})
    assert result.exit_code == 4
    assert "docker" in result.stderr


def test_run_builtin_reaches_shadowed_commands(project: Path, fdl_process) -> None:
    assert fdl_process(["run", "config"], cwd=project).stdout == "project-config\n"
    assert fdl_process(["run", "greet"], cwd=project).stdout == "hello\n"
    write(project, {"fdl.yml": "commands:\n  run: {run: echo manifest-run}\n"})
    assert fdl_process(["run"], cwd=project).stdout == "manifest-run\n"
    assert fdl_process(["run", "--", "x"], cwd=project).stdout == "manifest-run x\n"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("help_run.txt", ["greet", "--help"]),
        ("help_run_append.txt", ["argv", "-h"]),
        ("help_docker_run.txt", ["dtest", "--help"]),
        ("help_nested.txt", ["train", "--help"]),
        ("help_preset.txt", ["train", "quick", "--help"]),
        ("dry_run_host.txt", ["argv", "--dry-run", "--", "it's", "$HOME", ""]),
        ("dry_run_docker.txt", ["dtest", "--dry-run", "--", "-p", "a b", "--", "--ignored"]),
        ("dry_run_entry_docker.txt", ["train", "quick", "--dry-run", "--model", "mlp"]),
    ],
)
def test_help_and_dry_run_golden(
    project: Path, run_fdl, monkeypatch: pytest.MonkeyPatch, name: str, args: list[str]
) -> None:
    # Compose files read FDL_UID/FDL_GID (who runs dev containers): fdl exports the
    # user's ids; fixed here so the golden text does not depend on who runs the tests.
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    monkeypatch.setattr(os, "getgid", lambda: 1000)
    result = run_fdl(args, cwd=project, env=DETERMINISTIC)
    assert result.exit_code == 0, result.stderr
    assert_golden(name, normalize(result.stdout, project))


def test_group_help(tmp_path: Path, run_fdl) -> None:
    root = write(
        tmp_path,
        {
            "fdl.yml": "commands:\n  tools:\n",
            "tools/fdl.yml": "description: Tools\ncommands:\n  a: {run: echo a, description: A}\n  b: {run: echo b}\n",
        },
    )
    result = run_fdl(["tools"], cwd=root)
    assert result.exit_code == 0
    assert_golden("help_group.txt", normalize(result.stdout, root))


def test_top_level_help_lists_project_commands_and_environments(project: Path, run_fdl) -> None:
    write(project, {"fdl.ci.yml": "description: ci\n", "fdl.gpu.yaml": "description: gpu\n"})
    result = run_fdl(["--env", "gpu", "--help"], cwd=project)
    assert result.exit_code == 0
    section = result.stdout[result.stdout.index("Project commands") :]
    assert_golden("help_top_project.txt", section)
    builtins = result.stdout[result.stdout.index("Built-in commands") :]
    assert "completions" in builtins and "  run " in builtins


def test_completions_scripts(project: Path, run_fdl) -> None:
    for shell in ("bash", "zsh", "fish"):
        result = run_fdl(["completions", shell], cwd=project)
        assert result.exit_code == 0
        assert "fdl __complete" in result.stdout
    bad = run_fdl(["completions", "tcsh"], cwd=project)
    assert bad.exit_code == 2


def test_hidden_complete_command_answers(project: Path, run_fdl) -> None:
    result = run_fdl(["__complete", "zsh", "--", "train", ""], cwd=project)
    assert result.stdout.splitlines()[:2] == [
        "quick\tFast smoke test",
        "where\tPrint the directory",
    ]
    result = run_fdl(["__complete", "bash", "--", "train", "--model", "=", "le"], cwd=project)
    assert result.stdout == "lenet\n"


def test_fake_compose_receives_the_planned_argv(project: Path, fdl_process, tmp_path: Path) -> None:
    """A stand-in compose program records its argv: fdl runs exactly the plan."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker-compose"
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(),"
        " 'env': {k: os.environ.get(k) for k in ('LIBTORCH_HOST_PATH', 'CUDA_VERSION')}}))\n"
        "sys.exit(5)\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {"FDL_IN_CONTAINER": "0", "FDL_COMPOSE": str(fake)}
    result = fdl_process(["train", "--", "--x"], cwd=project / "train", env=env)
    assert result.exit_code == 5
    data = last_json(result.stdout)
    assert data["cwd"] == str(project)
    assert data["argv"][:2] == ["run", "--rm"]
    # The arguments follow the script as its positional parameters ("$@").
    # under bash (the prologue), as floDl's CLI runs it
    assert data["argv"][-10:-6] == ["dev", "sh", "-c", BASH_PROLOGUE]
    assert data["argv"][-5:] == ["--epochs", "5", "--seed", "42", "--x"]
    assert data["argv"][-6].splitlines()[0] == "cd /workspace/train || exit 125"
    assert data["argv"][-6].splitlines()[-1] == 'python3 ../printargv.py "$@"'
    assert data["env"] == {
        "LIBTORCH_HOST_PATH": str(project / "libtorch" / "precompiled" / "cu128"),
        "CUDA_VERSION": "12.8.0",
    }


def test_verbosity_reaches_the_command(project: Path, fdl_process) -> None:
    write(
        project,
        {"fdl.yml": "commands:\n  v: {run: 'echo \"[$FLODL_VERBOSITY|$FDL_VERBOSITY]\"'}\n"},
    )
    assert fdl_process(["v"], cwd=project).stdout == "[|]\n"
    assert fdl_process(["-vv", "v"], cwd=project).stdout == "[3|3]\n"
    assert fdl_process(["-q", "v"], cwd=project).stdout == "[0|0]\n"
    # after the command name, -v belongs to the command: not fdl's verbosity
    assert fdl_process(["v", "--", "-v"], cwd=project).stdout == "[|] -v\n"


def test_missing_libtorch_is_named_when_the_project_declares_one(
    fdl_process, tmp_path: Path
) -> None:
    project = write(
        tmp_path / "bare",
        {"fdl.yml": "libtorch: {torch: '2.13.0'}\ncommands:\n  b: {run: 'true'}\n"},
    )
    env = {"FDL_HOME": str(tmp_path / "home")}
    result = fdl_process(["b"], cwd=project, env=env)
    assert result.exit_code == 0
    assert "no active libtorch variant" in result.stderr
    assert "fdl libtorch install --from-wheel" in result.stderr
    write(project, {"fdl.yml": "commands:\n  b: {run: 'true'}\n"})
    assert "libtorch" not in fdl_process(["b"], cwd=project, env=env).stderr


def test_no_append_before_the_command_as_floDl_places_it(project: Path, run_fdl) -> None:
    """`fdl --no-append argv` (floDl's CLI takes it before the command) leaves out
    `append:` as `fdl argv --no-append` does; an entry ignores it, as floDl's CLI does."""
    before = run_fdl(["--no-append", "argv", "--dry-run", "--", "x"], cwd=project)
    after = run_fdl(["argv", "--no-append", "--dry-run", "--", "x"], cwd=project)
    assert before.exit_code == 0, before.stderr
    assert before.stdout == after.stdout
    assert "--appended" not in before.stdout
    entry = run_fdl(["--no-append", "train", "--dry-run"], cwd=project)
    assert entry.exit_code == 0, entry.stderr
    assert "--no-append" not in entry.stdout


def test_dry_run_of_a_docker_command_sets_the_verbosity_for_compose(project: Path, run_fdl) -> None:
    """`-v` reaches compose too (floDl's compose files pass FLODL_VERBOSITY on with a bare
    `environment:` entry): the dry run's script exports it, as the run has it."""
    result = run_fdl(["-v", "dtest", "--dry-run"], cwd=project, env=DETERMINISTIC)
    assert result.exit_code == 0, result.stderr
    exports = [line for line in result.stdout.splitlines() if line.startswith("export ")]
    assert "export FLODL_VERBOSITY=2" in exports
    assert "-e FLODL_VERBOSITY=2" in result.stdout
