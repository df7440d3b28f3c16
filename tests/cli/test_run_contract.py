"""floDl CLI 0.8.0's run-time contract as a user meets it: ``--gpus``, ``FDL_ENV``,
``HOSTNAME``, ``FDL_GPU_FEATURE``, ``docker: gpu``, ``cluster: true`` commands, scripts in a
container under bash, and a CPU service that keeps its image's libtorch.

A stand-in compose program runs what fdl asks a container to run here, with the ``-e``
variables (the compose file mounts the project at its own path, so ``cd`` works), and
says which service it was asked for on stderr."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.tasks._contract import BASH_PROLOGUE
from tests.support.tasks_helpers import fake_libtorch

SHOW = 'printf "%s|%s|%s|%s|%s\\n" "$CUDA_VISIBLE_DEVICES" "$HIP_VISIBLE_DEVICES" "$FDL_GPU_FEATURE" "$FDL_ENV" "$HOSTNAME"'

COMPOSE = """\
#!{python}
import os, sys
words = sys.argv[1:]
assert words[:2] == ["run", "--rm"], words
words, env = words[2:], dict(os.environ)
while words[0] == "-e":
    key, equals, value = words[1].partition("=")
    if equals:
        env[key] = value
    else:  # a bare `-e NAME`: compose's own value
        print("by-name=" + key, file=sys.stderr)
    words = words[2:]
print("service=" + words[0], file=sys.stderr, flush=True)
os.execvpe(words[1], words[1:], env)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "fdl.yml").write_text(
        "commands:\n"
        f"  show: {{run: {json.dumps(SHOW)}}}\n"
        "  train:\n"
        '    run: \'printf "%s\\n" "$FLODL_INTERNAL_FULL_CLUSTER_JSON" "$FLODL_INTERNAL_FDL_CMD"\'\n'
        "    cluster: true\n"
        '  brackets: {run: \'[[ -n "$FDL_GPU_FEATURE" ]] && echo "bash:$FDL_GPU_FEATURE"\', docker: gpu}\n'
        "  cpu: {run: 'echo \"[$LIBTORCH]\"', docker: dev}\n"
        "  dtrain: {run: 'echo \"${#FLODL_INTERNAL_FULL_CLUSTER_JSON}\"', docker: cuda, cluster: true}\n",
        encoding="utf-8",
    )
    (root / "fdl.ci.yml").write_text("commands: {}\n", encoding="utf-8")
    mount = f'[".:{root}"]'
    (root / "docker-compose.yml").write_text(
        "services:\n"
        f"  dev: {{image: d, volumes: {mount}}}\n"
        f"  cuda: {{image: c, volumes: {mount}, gpus: all}}\n"
        f"  rocm: {{image: r, volumes: {mount}, devices: [/dev/kfd, /dev/dri]}}\n",
        encoding="utf-8",
    )
    fake = tmp_path / "compose"
    fake.write_text(COMPOSE.format(python=sys.executable), encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return root


def _env(project: Path, **extra: str) -> dict[str, str]:
    return {
        "FDL_IN_CONTAINER": "0",
        "FDL_COMPOSE": str(project.parent / "compose"),
        "HOSTNAME": "",
        **extra,
    }


def test_gpus_masks_both_vendors_before_or_after_the_command(fdl_process, project: Path) -> None:
    for args in (
        ["--gpus", "0,1", "show"],
        ["show", "--gpus=0,1"],
        ["@ci", "show", "--gpus", "0,1"],
    ):
        result = fdl_process(args, cwd=project, env=_env(project, HOSTNAME="h"))
        assert result.exit_code == 0, result.output
        shown = result.stdout.strip().split("|")
        assert shown[:3] == ["0,1", "0,1", "cuda"]
    plain = fdl_process(["show"], cwd=project, env=_env(project, HOSTNAME="h"))
    assert plain.stdout == "||cuda||h\n"
    bad = fdl_process(["show", "--gpus", "0,0"], cwd=project, env=_env(project))
    assert bad.exit_code == 2 and "--gpus: device 0 is given twice" in bad.stderr
    twice = fdl_process(["--gpus", "0", "show", "--gpus", "1"], cwd=project, env=_env(project))
    assert twice.exit_code == 2 and "--gpus is given twice" in twice.stderr


def test_fdl_env_and_hostname_reach_the_command(fdl_process, project: Path) -> None:
    selected = fdl_process(["@ci", "show"], cwd=project, env=_env(project, HOSTNAME="given"))
    assert selected.stdout == "||cuda|ci|given\n"
    from_variable = fdl_process(["show"], cwd=project, env=_env(project, FDL_ENV="ci"))
    assert from_variable.stdout == f"||cuda|ci|{os.uname().nodename}\n"


def test_no_prebuild_and_ansi_are_accepted(fdl_process, project: Path) -> None:
    result = fdl_process(
        ["--no-prebuild", "--ansi", "show", "--no-prebuild"], cwd=project, env=_env(project)
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("||cuda|")  # --no-prebuild is not the script's argument
    both = fdl_process(["--ansi", "--no-ansi", "show"], cwd=project, env=_env(project))
    assert both.exit_code == 2 and "--ansi and --no-ansi" in both.stderr


def test_the_gpu_feature_and_service_follow_the_active_variant(fdl_process, project: Path) -> None:
    fake_libtorch(project, "precompiled/rocm70", cuda=None)
    host = fdl_process(["show"], cwd=project, env=_env(project))
    assert host.stdout.split("|")[2] == "rocm"
    rocm = fdl_process(["brackets"], cwd=project, env=_env(project))
    assert rocm.exit_code == 0, rocm.output
    assert "service=rocm" in rocm.stderr and rocm.stdout == "bash:rocm\n"  # [[ ]]: bash
    fake_libtorch(project, "precompiled/cu128")
    cuda = fdl_process(["brackets"], cwd=project, env=_env(project))
    assert "service=cuda" in cuda.stderr and cuda.stdout == "bash:cuda\n"
    compose = project / "docker-compose.yml"
    compose.write_text(compose.read_text().split("  rocm:")[0], encoding="utf-8")
    fake_libtorch(project, "precompiled/rocm70", cuda=None)
    fallback = fdl_process(["brackets"], cwd=project, env=_env(project))
    assert "service=cuda" in fallback.stderr and fallback.stdout == "bash:rocm\n"
    assert "defines no 'rocm' service: `docker: gpu` runs in 'cuda'" in fallback.stderr


def test_the_cpu_service_keeps_its_own_libtorch(fdl_process, project: Path) -> None:
    fake_libtorch(project, "precompiled/cu128")
    cuda = fdl_process(["cpu"], cwd=project, env=_env(project))
    assert cuda.stdout == "[]\n"
    assert "precompiled/cu128) is a CUDA build and service 'dev' has no GPU" in cuda.stderr
    cpu = fake_libtorch(project, "precompiled/cpu", cuda=None)
    assert fdl_process(["cpu"], cwd=project, env=_env(project)).stdout == f"[{cpu}]\n"


def test_a_cluster_command_gets_floDls_envelope(fdl_process, project: Path) -> None:
    result = fdl_process(["--gpus", "0,1", "train"], cwd=project, env=_env(project, HOSTNAME="h"))
    assert result.exit_code == 0, result.output
    envelope, command = result.stdout.splitlines()
    data = json.loads(bytes.fromhex(envelope))
    assert data["controller"] == {"host": "127.0.0.1", "port": 1337, "path": str(project)}
    assert data["workers"][0]["ranks"] == [0, 1] and command == "train"
    # in a container: by name, its value in compose's environment, not on a command line
    inside = fdl_process(["--gpus", "0,1", "dtrain"], cwd=project, env=_env(project))
    assert inside.exit_code == 0, inside.output
    assert int(inside.stdout) > 100 and "by-name=FLODL_INTERNAL_FULL_CLUSTER_JSON" in inside.stderr
    single = fdl_process(["train"], cwd=project, env=_env(project))
    assert single.exit_code == 0 and single.stdout == "\n\n"  # no --gpus, no block: runs here


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap to hide bash")
def test_an_image_without_bash_runs_the_script_under_sh_and_says_so(tmp_path: Path) -> None:
    hide = [a for p in ("/usr/bin/bash", "/bin/bash", "/usr/local/bin/bash") if Path(p).exists()
            for a in ("--ro-bind", "/dev/null", p)]  # fmt: skip
    base = ["bwrap", "--bind", "/", "/", *hide, "--dev", "/dev", "sh", "-c", BASH_PROLOGUE]
    got = subprocess.run(
        [*base, 'echo "sh:$0:$1"', "a b"], capture_output=True, text=True, check=False
    )
    if "bwrap:" in got.stderr:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {got.stderr.strip()}")
    assert got.returncode == 0 and got.stdout == "sh:sh:a b\n"
    assert "fdl: this image has no bash; running the script under sh" in got.stderr
    with_bash = subprocess.run(
        ["sh", "-c", BASH_PROLOGUE, 'echo "$0:$1:${BASH_VERSION:+bash}"', "a b"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert with_bash.stdout == "bash:a b:bash\n" and with_bash.stderr == ""


def test_completion_passes_over_the_value_of_gpus(project: Path) -> None:
    from fdl.cli._complete import complete_words

    after = [value for value, _ in complete_words(["--gpus", "0,1", ""], project, {}).candidates]
    assert "show" in after and "train" in after
    pending = complete_words(["--gpus", ""], project, {}).candidates
    assert "show" not in [value for value, _ in pending]  # a value is due, not a command
