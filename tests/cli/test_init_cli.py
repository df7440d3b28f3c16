"""`fdl init` through the command line: what it writes and says, re-runs, --force,
--dry-run, --json, names, and prompts only in a terminal."""

from __future__ import annotations

import json
import os
import pty
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CPP = ["--template", "cpp", "--mode", "native", "--torch", "2.13.0"]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_init_creates_a_project_and_says_what_next(tmp_path: Path, run_fdl) -> None:
    result = run_fdl(["init", "my-model", *CPP], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    project = tmp_path / "my-model"
    assert {"CMakeLists.txt", "fdl.yml", "fdl.ci.yml", ".github/workflows/ci.yml"} <= set(
        _tree(project)
    )
    assert "  created     CMakeLists.txt" in result.stdout
    assert "my-model: 19 created (template cpp, mode native, torch 2.13.0)" in result.stdout
    assert "cd my-model" in result.stdout and "fdl libtorch install --from-wheel" in result.stdout
    assert "fdl train -- --steps 100" in result.stdout
    assert yaml.safe_load((project / ".fdl-answers.yml").read_text())["answers"]["mode"] == "native"


def test_a_second_run_reuses_the_recorded_answers_and_changes_nothing(
    tmp_path: Path, run_fdl
) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    before = _tree(tmp_path / "p")
    again = run_fdl(["init", "."], cwd=tmp_path / "p")  # no options: the recorded answers
    assert again.exit_code == 0, again.output
    assert "p: 19 unchanged (template cpp, mode native, torch 2.13.0)" in again.stdout
    assert "using the defaults" not in again.stderr
    assert _tree(tmp_path / "p") == before


def test_a_non_empty_directory_is_refused_without_force(tmp_path: Path, run_fdl) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "notes.txt").write_text("mine\n")
    result = run_fdl(["init", "p", *CPP], cwd=tmp_path)
    assert result.exit_code == 2
    assert "is not empty and is not a project made by `fdl init`" in result.stderr
    assert "--force" in result.stderr
    assert _tree(project) == {"notes.txt": b"mine\n"}


def test_force_adds_to_a_directory_and_keeps_what_is_there(tmp_path: Path, run_fdl) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "notes.txt").write_text("mine\n")
    (project / "README.md").write_text("# my own readme\n")
    result = run_fdl(["init", "p", *CPP, "--force"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "  skipped     README.md  (differs from the template; yours is kept)" in result.stdout
    tree = _tree(project)
    assert tree["notes.txt"] == b"mine\n" and tree["README.md"] == b"# my own readme\n"
    assert "CMakeLists.txt" in tree


def test_force_rewrites_generated_files_only(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    dockerfile = project / "docker/train.Dockerfile"
    dockerfile.write_text(dockerfile.read_text().splitlines()[0] + "\nFROM scratch\n")
    (project / "src/train.cpp").write_text("// my training program\n")
    plain = run_fdl(["init", "p"], cwd=tmp_path)
    assert plain.exit_code == 0
    assert (
        "skipped     docker/train.Dockerfile  (differs from what fdl generates now" in plain.stdout
    )
    assert "fdl init --force rewrites the skipped files fdl generates" in plain.stderr
    forced = run_fdl(["init", "p", "--force"], cwd=tmp_path)
    assert forced.exit_code == 0
    assert "  overwritten docker/train.Dockerfile" in forced.stdout
    assert "FROM scratch" not in dockerfile.read_text()
    assert (project / "src/train.cpp").read_text() == "// my training program\n"


# Files at the paths fdl generates that fdl never wrote (no fdl header): the user's.
USERS_OWN = {
    ".github/workflows/ci.yml": "name: my own ci\n",
    "docker/train.Dockerfile": "FROM debian:12\n",
    ".dockerignore": "build/\n",
    "docker-compose.yml": "services: {}\n",
}


def test_force_keeps_files_at_generated_paths_that_fdl_did_not_write(
    tmp_path: Path, run_fdl
) -> None:
    project = tmp_path / "p"
    for name, text in USERS_OWN.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    result = run_fdl(["init", "p", "-t", "cpp", "-m", "mounted", "--force"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    for name, text in USERS_OWN.items():
        assert (project / name).read_text() == text, name
        assert f"  skipped     {name}  (yours: fdl did not write it" in result.stdout
    assert "move it aside to get fdl's" in result.stdout


def test_force_never_writes_through_a_linked_directory_that_leads_out(
    tmp_path: Path, run_fdl
) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project, elsewhere = tmp_path / "p", tmp_path / "elsewhere"
    (project / ".github").rename(elsewhere)
    decoy = elsewhere / "workflows/ci.yml"
    decoy.write_text(decoy.read_text() + "# someone else's line\n")
    before, outside = decoy.read_bytes(), _tree(elsewhere)
    (project / ".github").symlink_to(elsewhere)
    result = run_fdl(["init", "p", "--force"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "skipped     .github/workflows/ci.yml  (reached through a symbolic link" in (
        result.stdout
    )
    assert decoy.read_bytes() == before
    assert _tree(elsewhere) == outside


@pytest.mark.parametrize("kind", ["directory", "fifo", "dev-zero", "dangling"])
def test_an_answers_file_that_is_not_a_file_is_refused(tmp_path: Path, run_fdl, kind: str) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    answers = project / ".fdl-answers.yml"
    answers.unlink()
    if kind == "directory":
        answers.mkdir()
    elif kind == "fifo":
        os.mkfifo(answers)
    elif kind == "dev-zero":
        answers.symlink_to("/dev/zero")
    else:
        answers.symlink_to(tmp_path / "missing.yml")
    before = _tree(project)
    result = run_fdl(["init", "p", "--force"], cwd=tmp_path)
    assert result.exit_code == 3, result.output
    assert ".fdl-answers.yml: cannot read the answers of `fdl init`" in result.stderr
    assert _tree(project) == before
    assert not (project / "Cargo.toml").exists()


def test_dry_run_writes_nothing(tmp_path: Path, run_fdl) -> None:
    result = run_fdl(["init", "p", *CPP, "--dry-run"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "  would create      fdl.yml" in result.stdout
    assert "dry run: nothing written to p" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_json_output(tmp_path: Path, run_fdl) -> None:
    result = run_fdl(["init", "p", "-t", "flodl", "-m", "baked", "--json"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["answers"]["template"] == "flodl" and data["answers"]["mode"] == "baked"
    assert data["counts"]["created"] == len(data["files"])
    assert {"path": "Cargo.toml", "action": "created", "kind": "user", "reason": None} in data[
        "files"
    ]


@pytest.mark.parametrize(
    ("name", "fix"), [("My Model", "e.g. 'my-model'"), ("fn", "e.g. 'fn-model'")]
)
def test_bad_names_are_usage_errors_with_a_fix(
    tmp_path: Path, run_fdl, name: str, fix: str
) -> None:
    result = run_fdl(["init", name, "--yes"], cwd=tmp_path)
    assert result.exit_code == 2
    assert f"invalid project name {name!r}" in result.stderr
    assert f"fix: {fix}" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_a_terminal_defaults_are_used_and_said(tmp_path: Path, run_fdl) -> None:
    result = run_fdl(["init", "p"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert (
        "note: using the defaults --template flodl, --mode mounted (no terminal to ask; "
        "pass them to choose)" in result.stderr
    )
    assert (tmp_path / "p" / "Cargo.toml").is_file()


def test_help_lists_init_with_an_example(run_fdl) -> None:
    assert "init" in run_fdl(["--help"]).stdout
    text = run_fdl(["init", "--help"]).stdout
    assert "Example: fdl init my-model --template cpp --mode native" in text


def _in_terminal(args: list[str], cwd: Path, typed: bytes) -> tuple[int, bytes]:
    """Run fdl with a pseudo-terminal as stdin/stdout/stderr, typing ``typed``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    pid, master = pty.fork()
    if pid == 0:  # the child
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "fdl", *args], env)
    os.write(master, typed)
    output = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    os.close(master)
    return os.waitstatus_to_exitcode(status), output


def test_in_a_terminal_it_asks_for_template_and_mode(tmp_path: Path) -> None:
    code, output = _in_terminal(["init", "p", "--torch", "2.13.0"], tmp_path, b"2\n\n")
    assert code == 0, output.decode(errors="replace")
    text = output.decode()
    assert "Template:" in text and "2) cpp" in text and "Mode:" in text
    assert "p: 21 created (template cpp, mode mounted, torch 2.13.0)" in text


def test_yes_asks_nothing_even_in_a_terminal(tmp_path: Path) -> None:
    code, output = _in_terminal(["init", "p", "--yes", "-t", "cpp"], tmp_path, b"")
    assert code == 0, output.decode(errors="replace")
    text = output.decode()
    assert "Mode:" not in text
    assert "using the defaults --mode mounted (--yes; pass them to choose)" in text


def test_your_own_manifest_is_kept_and_the_images_follow_it(tmp_path: Path, run_fdl) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "fdl.yml").write_text(
        "description: mine\nimages:\n  train:\n    base: me/base:1\n    program: build/train\n"
    )
    result = run_fdl(["init", ".", *CPP, "--force"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "  skipped     fdl.yml  (differs from the template; yours is kept)" in result.stdout
    assert "move yours away and run fdl init again" in result.stderr
    assert (project / "fdl.yml").read_text().startswith("description: mine")
    assert "ARG BASE_IMAGE=me/base:1" in (project / "docker/train.Dockerfile").read_text()
    broken = run_fdl(["init", ".", "--force"], cwd=project, env={})
    assert broken.exit_code == 0  # the answers were recorded: nothing is asked or guessed
    (project / "fdl.yml").write_text("description: mine\nimages:\n  train:\n    bse: x\n")
    invalid = run_fdl(["init", "."], cwd=project)
    assert invalid.exit_code == 3
    assert "fdl.yml:4:5: images.train.bse: unknown key 'bse'" in invalid.stderr


@pytest.mark.parametrize(
    ("args", "script"),
    [
        # The user's arguments follow the script as "$@" (sh's positional parameters).
        (["test", "--", "-p", "foo"], """'cargo test "$@" -- --nocapture' sh -p foo"""),
        (
            ["clippy", "--", "--all-targets"],
            """'cargo clippy "$@" -- -W clippy::all' sh --all-targets""",
        ),
        (["train", "--", "--epochs", "5"], """'cargo run --release -- "$@"' sh --epochs 5"""),
        (["gpu-test"], """'cargo test --features "$FDL_GPU_FEATURE" -- --nocapture'"""),
        (["--env", "ci", "train"], "'cargo run --release -- --epochs 3'"),
    ],
)
def test_flodl_commands_put_the_users_arguments_where_cargo_wants_them(
    tmp_path: Path, run_fdl, args: list[str], script: str
) -> None:
    assert run_fdl(["init", "p", "-t", "flodl", "-m", "native"], cwd=tmp_path).exit_code == 0
    global_args = args[:2] if args[0] == "--env" else []
    rest = args[len(global_args) :]
    result = run_fdl([*global_args, rest[0], "--dry-run", *rest[1:]], cwd=tmp_path / "p")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"sh -c {script}"


def test_the_old_command_names_say_the_new_ones(tmp_path: Path, run_fdl) -> None:
    """floDl 0.8's names: `fdl cuda-build` in a project of the new template names
    `gpu-build`; `fdl start` (floDl's built-in cluster start) names `train-debug`."""
    assert run_fdl(["init", "p", "-t", "flodl", "-m", "native"], cwd=tmp_path).exit_code == 0
    for old, now in (
        ("cuda-build", "gpu-build"),
        ("cuda-start", "gpu-run"),
        ("start", "train-debug"),
    ):
        result = run_fdl([old], cwd=tmp_path / "p")
        assert result.exit_code == 2, result.output
        if old == "start":  # also floDl's own built-in: said, with the project's new name
            assert "`fdl start` is a command of floDl's CLI" in result.stderr
        else:
            assert f"unknown command '{old}' in fdl.yml" in result.stderr
        assert f"run `fdl {now}`" in result.stderr and "fdl init --update" in result.stderr


# --- the cuda service gets the libtorch fdl setup would pick ---------------------------------


def _fake_gpus(tmp_path: Path, rows: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{rows}'\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _cuda_service(project: Path) -> tuple[str, str]:
    images = yaml.safe_load((project / "fdl.yml").read_text())["images"]
    dockerfile = (project / "docker" / "cuda.Dockerfile").read_text()
    base = next(line for line in dockerfile.splitlines() if line.startswith("ARG BASE_IMAGE="))
    return images["cuda"]["variant"], base.split("=", 1)[1]


def test_the_cuda_service_follows_this_machines_gpus_and_driver(tmp_path: Path, run_fdl) -> None:
    """GTX 1060 + RTX 5060 Ti on driver 570: no official build covers both, so the cuda
    service uses the source build fdl setup plans (CUDA 12.9), not cu130 (no sm_61, needs
    driver 580), of torch 2.10.0: the release floDl 0.8.0 compiles against."""
    env = _fake_gpus(
        tmp_path,
        "0, NVIDIA GeForce GTX 1060 6GB, 6.1, 6144, 570.86\\n"
        "1, NVIDIA GeForce RTX 5060 Ti, 12.0, 16384, 570.86\\n",
    )
    env.update(FDL_HOME=str(tmp_path / "home"), FDL_CACHE_DIR=str(tmp_path / "cache"))
    made = run_fdl(["init", "p", "--yes"], cwd=tmp_path, env=env)
    assert made.exit_code == 0, made.output
    assert _cuda_service(tmp_path / "p") == (
        "builds/sm61-sm120",
        "nvidia/cuda:12.9.1-cudnn-devel-ubuntu24.04",
    )
    text = (tmp_path / "p" / "fdl.yml").read_text()
    assert 'torch: "2.10.0"' in text
    assert "# Get it with: fdl libtorch build --archs 6.1,12.0 --torch 2.10.0" in text
    setup = run_fdl(["setup", "--dry-run", "--json"], cwd=tmp_path / "p", env=env)
    selection = json.loads(setup.stdout)["plan"]["selection"]
    # the project's torch (2.10.0, floDl 0.8.0's) is older than the newest known: the
    # build names it, as the fdl.yml comment does
    assert selection["build_command"] == "fdl libtorch build --archs 6.1,12.0 --torch 2.10.0"
    assert selection["build_cuda"] == "12.9"
    recorded = yaml.safe_load((tmp_path / "p" / ".fdl-answers.yml").read_text())["answers"]
    assert (recorded["gpus"], recorded["driver"]) == ("6.1,12.0", "570.86")


@pytest.mark.parametrize(
    ("rows", "action", "command"),
    [
        # the mission's rig: no official 2.10.0 build has sm_61 and sm_120 code
        (
            "0, NVIDIA GeForce GTX 1060 6GB, 6.1, 6144, 570.86\\n"
            "1, NVIDIA GeForce RTX 5060 Ti, 12.0, 16384, 570.86\\n",
            "build",
            "fdl libtorch build --archs 6.1,12.0 --torch 2.10.0",
        ),
        (
            "0, NVIDIA GeForce RTX 3090, 8.6, 24576, 580.65\\n",
            "download",
            "fdl libtorch download --cuda 12.8 --torch 2.10.0",
        ),
        ("", "download", "fdl libtorch download --cpu --torch 2.10.0"),
    ],
    ids=["pascal-blackwell", "rtx3090", "no-gpu"],
)
def test_setup_in_a_fresh_flodl_project_plans_for_the_gpus(
    tmp_path: Path, run_fdl, rows: str, action: str, command: str
) -> None:
    """The template pins floDl's torch and no variant: setup plans CUDA on a GPU machine
    (a `variant: cpu` pin made it plan the CPU build there)."""
    env = _fake_gpus(tmp_path, rows)  # no rows: an nvidia-smi that lists no GPU
    env.update(FDL_HOME=str(tmp_path / "home"), FDL_CACHE_DIR=str(tmp_path / "cache"))
    assert run_fdl(["init", "p", "--yes"], cwd=tmp_path, env=env).exit_code == 0
    setup = run_fdl(["setup", "--dry-run", "--json"], cwd=tmp_path / "p", env=env)
    assert setup.exit_code == 0, setup.output
    plan = json.loads(setup.stdout)["plan"]
    assert (plan["action"], plan["command"]) == (action, command)
    assert plan["selection"]["how"] == "detected"
    if action == "build":
        assert plan["selection"]["build_cuda"] == "12.9"


@pytest.mark.parametrize(
    ("gpus", "driver", "variant", "base"),
    [
        # torch 2.10.0 (floDl 0.8.0's): its cu126 build is the one with Pascal code
        ("6.1", "570.86", "precompiled/cu126", "nvidia/cuda:12.6.3-cudnn-devel-ubuntu24.04"),
        ("8.6", "580.65", "precompiled/cu128", "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"),
        ("none", "", "precompiled/cu128", "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"),
    ],
)
def test_declared_gpus_pick_the_cuda_service(
    tmp_path: Path, run_fdl, gpus: str, driver: str, variant: str, base: str
) -> None:
    args = ["init", "p", "--yes", "--gpus", gpus]
    if driver:
        args += ["--driver", driver]
    made = run_fdl(args, cwd=tmp_path)
    assert made.exit_code == 0, made.output
    assert _cuda_service(tmp_path / "p") == (variant, base)


def test_gpus_no_build_can_serve_are_refused_with_the_release_that_can(
    tmp_path: Path, run_fdl
) -> None:
    # Kepler: torch 2.10.0 (floDl 0.8.0's) has no build for it, and only an older torch,
    # which floDl cannot compile against, could be built for it
    refused = run_fdl(["init", "p", "--yes", "--gpus", "3.7"], cwd=tmp_path)
    assert refused.exit_code == 2, refused.output
    assert "torch 2.10.0 has no CUDA build for sm_37" in refused.stderr
    assert "floDl 0.8.0" in refused.stderr and "--gpus" in refused.stderr
    assert not (tmp_path / "p").exists()
    bad = run_fdl(["init", "p", "--yes", "--gpus", "sm_9x"], cwd=tmp_path)
    assert bad.exit_code == 2 and "--gpus" in bad.stderr


# --- fdl init --update: the current template applied to an older project ---------------------


def test_update_merges_the_template_change_with_yours(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    base = project / ".fdl" / "template"
    assert (base / "CMakeLists.txt").read_text() == (project / "CMakeLists.txt").read_text()
    # an older template's README (what fdl wrote then) that the user then edited
    readme = (project / "README.md").read_text()
    older = readme.replace("## ", "## (old) ", 1)
    (base / "README.md").write_text(older)
    (project / "README.md").write_text(older + "\nMy notes.\n")
    preview = run_fdl(["init", ".", "--update", "--dry-run"], cwd=project)
    assert preview.exit_code == 0, preview.output
    assert "would merge       README.md" in preview.stdout
    assert "-## (old) " in preview.stdout and "+## " in preview.stdout
    assert (project / "README.md").read_text() == older + "\nMy notes.\n"  # nothing written
    done = run_fdl(["init", ".", "--update"], cwd=project)
    assert done.exit_code == 0, done.output
    assert (project / "README.md").read_text() == readme + "\nMy notes.\n"
    assert (base / "README.md").read_text() == readme  # the next base is this template


def test_update_moves_a_flodl_v1_project_to_flodl_0_8(tmp_path: Path, run_fdl) -> None:
    """A project of the flodl template's version 1 (floDl 0.5.3, `start` and `cuda-*`),
    as fdl wrote it, plus a command of the user's: `fdl init --update` gives it floDl
    0.8.0, its command names, the rocm feature, service and Dockerfile and .env.example,
    and keeps the user's command; the old names then say the new ones."""
    made = run_fdl(["init", "my-model", "-t", "flodl", "-m", "mounted"], cwd=tmp_path)
    assert made.exit_code == 0, made.output
    project, v1 = tmp_path / "my-model", REPO / "tests" / "fixtures" / "scaffold-flodl-v1"
    base = project / ".fdl" / "template"
    for name in ("fdl.yml", "Cargo.toml"):
        (base / name).write_text((v1 / name).read_text())
        (project / name).write_text((v1 / name).read_text())
    for gone in (".env.example", "docker/rocm.Dockerfile", ".fdl/template/.env.example"):
        (project / gone).unlink()
    answers = project / ".fdl-answers.yml"
    answers.write_text(answers.read_text().replace("template_version: 2", "template_version: 1"))
    mine = "  lint-all:\n    description: mine\n    run: cargo clippy --all-targets\n"
    manifest = project / "fdl.yml"
    manifest.write_text(
        manifest.read_text().replace("  # --- CPU ---\n", "  # --- CPU ---\n" + mine)
    )
    assert "cuda-build" in run_fdl(["--help"], cwd=project).stdout

    done = run_fdl(["init", ".", "--update"], cwd=project)
    assert done.exit_code == 0, done.output
    commands = yaml.safe_load(manifest.read_text())["commands"]
    assert {"gpu-build", "gpu-test", "gpu-run", "gpu-train", "gpu-shell", "train-debug"} <= set(
        commands
    )
    assert commands["lint-all"] == {"description": "mine", "run": "cargo clippy --all-targets"}
    assert commands["gpu-build"]["docker"] == "gpu"
    cargo = (project / "Cargo.toml").read_text()
    assert 'flodl = "0.8.0"' in cargo and 'rust-version = "1.91"' in cargo
    assert 'rocm = ["flodl/rocm"]' in cargo
    assert (project / ".env.example").is_file()
    compose = yaml.safe_load((project / "docker-compose.yml").read_text())["services"]
    assert compose["rocm"]["devices"] == ["/dev/kfd", "/dev/dri"]
    assert (project / "docker" / "rocm.Dockerfile").is_file()
    assert "template_version: 2" in answers.read_text()
    assert not {"start", "cuda-build", "cuda-test", "cuda-start", "cuda-train"} & set(commands)
    old = run_fdl(["cuda-train"], cwd=project)
    assert old.exit_code == 2 and "run `fdl gpu-train`" in old.stderr, old.output


def test_update_marks_conflicts_and_keeps_both_sides(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    cmake = (project / "CMakeLists.txt").read_text()
    first = cmake.splitlines(keepends=True)[0]
    (project / ".fdl" / "template" / "CMakeLists.txt").write_text(
        "# old first line\n" + cmake[len(first) :]
    )
    (project / "CMakeLists.txt").write_text("# my first line\n" + cmake[len(first) :])
    result = run_fdl(["init", ".", "--update"], cwd=project)
    assert result.exit_code == 1, result.output
    text = (project / "CMakeLists.txt").read_text()
    assert "<<<<<<< yours\n# my first line\n||||||| base\n# old first line\n=======\n" in text
    assert first in text and ">>>>>>> template cpp v" in text
    assert "conflict    CMakeLists.txt" in result.stdout


def test_update_deletes_only_unchanged_files_the_template_dropped(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    base = project / ".fdl" / "template"
    (base / "old.txt").write_text("fdl wrote this\n")
    (project / "old.txt").write_text("fdl wrote this\n")
    (base / "notes.txt").write_text("fdl wrote this\n")
    (project / "notes.txt").write_text("and I changed it\n")
    result = run_fdl(["init", ".", "--update"], cwd=project)
    assert result.exit_code == 0, result.output
    assert not (project / "old.txt").exists() and not (base / "old.txt").exists()
    assert (project / "notes.txt").read_text() == "and I changed it\n"


def test_update_in_a_renamed_directory_keeps_the_project_name(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    (tmp_path / "p").rename(tmp_path / "p-copy")
    project = tmp_path / "p-copy"
    cmake = (project / "CMakeLists.txt").read_text()
    result = run_fdl(["init", ".", "--update"], cwd=project)
    assert result.exit_code == 0, result.output
    assert (project / "CMakeLists.txt").read_text() == cmake
    assert "p-copy" not in (project / "CMakeLists.txt").read_text()
    assert "p-copy" not in (project / "fdl.yml").read_text()


def test_update_keeps_the_mode_of_the_files_it_rewrites(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    base = project / ".fdl" / "template"
    readme = (project / "README.md").read_text()
    (base / "README.md").write_text(readme.replace("## ", "## (old) ", 1))
    (project / "README.md").write_text(readme.replace("## ", "## (old) ", 1))
    (project / "README.md").chmod(0o600)
    dockerfile = project / "docker/train.Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# edited\n")
    dockerfile.chmod(0o640)
    result = run_fdl(["init", ".", "--update"], cwd=project)
    assert result.exit_code == 0, result.output
    assert (project / "README.md").read_text() == readme
    assert "# edited" not in dockerfile.read_text()
    assert (project / "README.md").stat().st_mode & 0o777 == 0o600
    assert dockerfile.stat().st_mode & 0o777 == 0o640


def test_update_needs_a_project_made_by_init(tmp_path: Path, run_fdl) -> None:
    result = run_fdl(["init", "p", "--update"], cwd=tmp_path)
    assert result.exit_code == 2 and "not a project made by `fdl init`" in result.stderr
    assert not (tmp_path / "p").exists()


def test_update_writes_nothing_through_a_symbolic_link(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "README.md").write_text("not the project's\n")
    (project / "README.md").unlink()
    (project / "README.md").symlink_to(outside / "README.md")
    base = project / ".fdl" / "template"
    (base / "README.md").write_text("older\n")
    result = run_fdl(["init", ".", "--update"], cwd=project)
    assert result.exit_code == 0, result.output
    assert (outside / "README.md").read_text() == "not the project's\n"
    assert "symbolic link" in result.stdout
    # the base directory itself a link: refused before anything
    moved = tmp_path / "elsewhere"
    base.rename(moved)
    base.symlink_to(moved)
    refused = run_fdl(["init", ".", "--update"], cwd=project)
    assert refused.exit_code == 2 and "symbolic link" in refused.stderr


# --- a directory that holds a project of another template ----------------------------------


@pytest.mark.parametrize(
    ("first", "then", "marker"),
    [
        (["-t", "cpp", "-m", "native"], "flodl", "CMakeLists.txt"),
        (["-t", "flodl"], "cpp", "Cargo.toml"),
    ],
)
def test_init_refuses_a_project_of_another_template(
    tmp_path: Path, run_fdl, first: list[str], then: str, marker: str
) -> None:
    assert run_fdl(["init", "p", *first, "--yes"], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    before = _tree(project)
    for extra in ([], ["--force"], ["--update"]):
        result = run_fdl(["init", "p", "--template", then, *extra], cwd=tmp_path)
        assert result.exit_code == 2, result.output
        assert "records template" in result.stderr and f"does not add a {then}" in result.stderr
        assert "fdl init p --update" in result.stderr
        assert f"fdl init p-{then} --template {then}" in result.stderr
        assert _tree(project) == before
    # a project fdl did not make (no answers file): its build file says what it is
    (project / ".fdl-answers.yml").unlink()
    result = run_fdl(["init", "p", "--template", then, "--force"], cwd=tmp_path)
    assert result.exit_code == 2, result.output
    assert f"holds a {marker}" not in result.stderr and f"it holds {marker}" in result.stderr
    assert "--update" not in result.stderr
    assert set(_tree(project)) == set(before) - {".fdl-answers.yml"}


def test_a_cargo_toml_alone_does_not_tell_the_rust_templates_apart(tmp_path: Path, run_fdl) -> None:
    """flodl and tch both mark a project with Cargo.toml: without an answers file, either
    may complete a Cargo project (yours kept), and the recorded one refuses the other."""
    project = tmp_path / "p"
    project.mkdir()
    mine = '[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n'
    (project / "Cargo.toml").write_text(mine)
    made = run_fdl(["init", "p", "-t", "tch", "-m", "native", "--force"], cwd=tmp_path)
    assert made.exit_code == 0, made.output
    assert (project / "Cargo.toml").read_text() == mine
    assert "template: tch" in (project / ".fdl-answers.yml").read_text()
    refused = run_fdl(["init", "p", "-t", "flodl", "--force"], cwd=tmp_path)
    assert refused.exit_code == 2 and "records template tch" in refused.stderr, refused.output


# --- fdl ci right after fdl init ------------------------------------------------------------


@pytest.mark.parametrize("options", [CPP, ["-t", "flodl", "-m", "mounted", "--gpus", "none"]])
def test_ci_generate_and_check_agree_with_init(tmp_path: Path, run_fdl, options: list[str]) -> None:
    assert run_fdl(["init", "p", *options], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    assert (project / ".github/workflows/fdl-images.yml").is_file()
    before = _tree(project)
    check = run_fdl(["ci", "check"], cwd=project)
    assert check.exit_code == 0, check.output
    generate = run_fdl(["ci", "generate"], cwd=project)
    assert generate.exit_code == 0, generate.output
    assert "wrote" not in generate.stderr and "5 files unchanged" in generate.stderr
    assert _tree(project) == before


def test_init_inside_another_repository_leaves_the_ci_files_to_ci_generate(
    tmp_path: Path, run_fdl
) -> None:
    (tmp_path / ".git").mkdir()  # the project is a directory of a larger repository
    assert run_fdl(["init", "p", *CPP], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    assert not (project / ".github/workflows/fdl-images.yml").exists()
    assert run_fdl(["ci", "generate"], cwd=project).exit_code == 0
    assert (tmp_path / ".github/workflows/fdl-images.yml").is_file()
    assert (project / "ci/docker-bake.hcl").is_file()
    assert run_fdl(["ci", "check"], cwd=project).exit_code == 0


# --- the HuggingFace playground: fdl init --with-hf, fdl add flodl-hf -----------------------

FLODL_NATIVE = ["-t", "flodl", "-m", "native", "--gpus", "none"]


def test_init_with_hf_gives_a_playground_its_command_runs(tmp_path: Path, run_fdl) -> None:
    result = run_fdl(["init", "p", *FLODL_NATIVE, "--with-hf"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "fdl flodl-hf classify" in result.stdout  # a next step
    project = tmp_path / "p"
    assert (project / "flodl-hf/src/main.rs").is_file()
    planned_run = run_fdl(["flodl-hf", "classify", "--dry-run"], cwd=project)
    assert planned_run.exit_code == 0, planned_run.output
    assert f"cd {project / 'flodl-hf'}" in planned_run.stdout
    assert "cargo run --release --" in planned_run.stdout
    refused = run_fdl(["init", "q", *CPP, "--with-hf"], cwd=tmp_path)
    assert refused.exit_code == 2 and "--template flodl" in refused.stderr


def test_add_flodl_hf_merges_it_into_a_project_keeping_your_edits(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "p", *FLODL_NATIVE], cwd=tmp_path).exit_code == 0
    project = tmp_path / "p"
    manifest = project / "fdl.yml"
    manifest.write_text(manifest.read_text() + "# my own note\n")
    before = _tree(project)
    preview = run_fdl(["add", "flodl-hf", "--dry-run"], cwd=project)
    assert preview.exit_code == 0, preview.output
    assert "would create      flodl-hf/Cargo.toml" in preview.stdout
    assert "+  flodl-hf:" in preview.stdout
    assert _tree(project) == before
    result = run_fdl(["add", "flodl-hf"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "merged      fdl.yml" in result.stdout
    text = manifest.read_text()
    assert "# my own note\n" in text and "    path: flodl-hf\n" in text
    assert yaml.safe_load((project / ".fdl-answers.yml").read_text())["answers"]["hf"] is True
    assert (project / "flodl-hf/fdl.yml").is_file()
    assert _tree(project)["Cargo.toml"] == before["Cargo.toml"]
    assert run_fdl(["flodl-hf", "classify", "--dry-run"], cwd=project).exit_code == 0
    again = run_fdl(["add", "hf"], cwd=project)  # floDl's alias; nothing left to do
    assert again.exit_code == 0 and "created" not in again.stdout


def test_add_refuses_what_it_cannot_add(tmp_path: Path, run_fdl) -> None:
    assert run_fdl(["init", "c", *CPP], cwd=tmp_path).exit_code == 0
    other = run_fdl(["add", "flodl-hf"], cwd=tmp_path / "c")
    assert other.exit_code == 2 and "c is a cpp project" in other.stderr
    (tmp_path / "plain").mkdir()
    plain = run_fdl(["add", "flodl-hf"], cwd=tmp_path / "plain")
    assert plain.exit_code == 2 and "not a project made by `fdl init`" in plain.stderr
    assert "--with-hf" in plain.stderr
    unknown = run_fdl(["add", "pandas"], cwd=tmp_path / "c")
    assert unknown.exit_code == 2 and "unknown target 'pandas'" in unknown.stderr
    assert list((tmp_path / "plain").iterdir()) == []


def test_flodls_mode_flags_are_aliases_of_mode(tmp_path: Path, run_fdl) -> None:
    """floDl's `fdl init x --native` / `--docker` (issue 34, point 8): typer suggested
    `--update` and `--driver` for them."""
    cpp = ["-t", "cpp", "--torch", "2.13.0"]
    native = run_fdl(["init", "n", "--native", *cpp], cwd=tmp_path)
    assert native.exit_code == 0, native.output
    assert "(template cpp, mode native," in native.stdout
    docker = run_fdl(["init", "d", "--docker", *cpp], cwd=tmp_path)
    assert docker.exit_code == 0, docker.output
    assert "(template cpp, mode baked," in docker.stdout
    both = run_fdl(["init", "b", "--native", "--docker", *cpp], cwd=tmp_path)
    assert both.exit_code == 2 and "--native and --docker exclude each other" in both.stderr
    clash = run_fdl(["init", "c", "--native", "--mode", "mounted", *cpp], cwd=tmp_path)
    assert clash.exit_code == 2
    assert "--native is --mode native, but --mode mounted was given too" in clash.stderr


def test_in_a_terminal_a_flodl_project_is_asked_about_flodl_hf(tmp_path: Path) -> None:
    code, output = _in_terminal(["init", "p", "-m", "native"], tmp_path, b"\ny\n")
    text = output.decode(errors="replace")
    assert code == 0, text
    assert "Include flodl-hf" in text and "[y/N]" in text
    assert (tmp_path / "p" / "flodl-hf").is_dir()
    answers = yaml.safe_load((tmp_path / "p" / ".fdl-answers.yml").read_text())["answers"]
    assert answers["hf"] is True


def test_cpp_on_a_machine_with_gpus_pins_no_cpu_variant(run_fdl, tmp_path: Path) -> None:
    """The C++ template pins `variant: cpu` only where init saw no GPU: on a GPU machine
    `fdl setup` must plan for the GPUs, not the CPU build the pin would force."""
    gpu = run_fdl(["init", "gpu-model", "--template", "cpp", "--mode", "native", "--gpus",
                   "6.1,12.0", "--driver", "575.51", "--yes"], cwd=tmp_path)  # fmt: skip
    assert gpu.exit_code == 0, gpu.output
    manifest = (tmp_path / "gpu-model" / "fdl.yml").read_text()
    assert "variant:" not in manifest.split("commands:")[0]
    assert "this machine has GPUs: 6.1,12.0" in manifest
    cpu = run_fdl(["init", "cpu-model", "--template", "cpp", "--mode", "native", "--gpus",
                   "none", "--yes"], cwd=tmp_path)  # fmt: skip
    assert cpu.exit_code == 0, cpu.output
    assert "  variant: cpu\n" in (tmp_path / "cpu-model" / "fdl.yml").read_text()
