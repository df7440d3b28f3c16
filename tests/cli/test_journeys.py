"""Journeys: a new user's whole path, init -> setup -> the build plan -> a training dry run,
as the manual's journeys (docs/journeys/) tell it, asserting on what the user reads (issue 34).

Personas: a floDl user on the mission's rig (a GTX 1060, sm_61, beside an RTX 5060 Ti,
sm_120, through a fake `nvidia-smi` on PATH) on driver 570, the same on driver 560 (older
than Blackwell's R570 floor), and a tch-rs user without a GPU. The CPU path runs for real:
`fdl libtorch install --from-wheel --cpu` reads the CPU view out of a CUDA 12.8 torch
wheel served on 127.0.0.1 (tests/support/cpu_view_wheels.py). Nothing is compiled and no
container runs: the commands stop at their plans. About 30 s on 2 cores.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import faulty_http
from tests.support.cpu_view_wheels import TORCH, PackageIndex
from tests.support.faulty_http import FaultyServer
from tests.support.libtorch_trees import make_tree

faulty_server = faulty_http.faulty_server  # the fixture

GTX_1060 = "0, NVIDIA GeForce GTX 1060 6GB, 6.1, 6144, {driver}"
RTX_5060_TI = "1, NVIDIA GeForce RTX 5060 Ti, 12.0, 16384, {driver}"
BUILD = "fdl libtorch build --archs 6.1,12.0 --torch 2.10.0"


@pytest.fixture
def index(faulty_server: FaultyServer) -> PackageIndex:
    """PyPI as far as the CPU view reads it: torch 2.10.0's CUDA 12.8 wheel."""
    found = PackageIndex(faulty_server)
    found.add_torch()
    return found


def machine(tmp_path: Path, *rows: str) -> dict[str, str]:
    """This machine's GPUs (an `nvidia-smi` that prints ``rows``), fdl's home and cache,
    and commands planned for their containers (the tests may run inside one), with the
    compose command named so that no plan depends on a docker daemon answering here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    listing = "".join(f"{row}\\n" for row in rows)
    smi.write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    smi.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_IN_CONTAINER": "0",
        "FDL_COMPOSE": "docker compose",
    }


def rig(tmp_path: Path, driver: str) -> dict[str, str]:
    return machine(tmp_path, GTX_1060.format(driver=driver), RTX_5060_TI.format(driver=driver))


def lines_of(text: str, prefix: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith(prefix)]


def comment_above(manifest: str, key: str) -> str:
    """The comment lines right above ``key`` in a YAML file, joined into one text."""
    lines = manifest.splitlines()
    at = lines.index(key)
    above = []
    for line in reversed(lines[:at]):
        if not line.strip().startswith("#"):
            break
        above.insert(0, line.strip().lstrip("#").strip())
    return " ".join(above)


def install_cpu_view(run_fdl, project: Path, env: dict[str, str], index: PackageIndex) -> dict:
    done = run_fdl(
        ["libtorch", "install", "--from-wheel", "--cpu", "--index-url", index.url, "--json"],
        cwd=project,
        env=env,
    )
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_flodl_user_on_the_mixed_rig(tmp_path: Path, run_fdl, index: PackageIndex) -> None:
    env = rig(tmp_path, "570.86")
    made = run_fdl(["init", "my-model", "--yes"], cwd=tmp_path, env=env)
    assert made.exit_code == 0, made.output
    steps = [line.split("#")[0].strip() for line in made.stdout.splitlines() if "  # " in line]
    assert steps[1:4] == ["fdl libtorch install --from-wheel --cpu", "fdl setup", "fdl build"]
    project = tmp_path / "my-model"
    manifest = (project / "fdl.yml").read_text()
    assert 'libtorch:\n  torch: "2.10.0"\n\ncommands:' in manifest  # floDl's torch, no variant
    assert f"Get it with: {BUILD}" in manifest

    # fdl setup plans the source build for both GPUs, never the CPU build
    plan = run_fdl(["setup", "--dry-run"], cwd=project, env=env)
    assert plan.exit_code == 0, plan.output
    assert "GPU 0: NVIDIA GeForce GTX 1060 6GB, sm_61 (Pascal)\n" in plan.stdout
    assert "GPU 1: NVIDIA GeForce RTX 5060 Ti, sm_120 (Blackwell)\n" in plan.stdout
    assert "torch 2.10.0: libtorch.torch (fdl.yml:" in plan.stdout  # floDl 0.8.0's, pinned by init
    assert (
        "plan: build: no official libtorch 2.10.0 covers sm_61 + sm_120: a source build does\n"
        in plan.stdout
    )
    assert f"command:  {BUILD}\n" in plan.stdout
    assert "(torch 2.10.0, CUDA 12.9)" in plan.stdout
    assert "CPU build" not in plan.stdout and "driver" not in plan.stdout.split("plan:")[1]
    (alternative,) = lines_of(plan.stdout, "or:")
    assert alternative.endswith("(the official cu128 build: runs on sm_120 only)")
    assert f"next step (takes hours): {BUILD}" in plan.stderr

    # the CPU path, for real: the dev service's libtorch, read out of PyPI's CUDA wheel
    view = install_cpu_view(run_fdl, project, env, index)
    assert view["path"] == str(project / "libtorch" / "precompiled" / "cpu")
    assert view["cuda"] is None and view["torch"] == TORCH
    again = run_fdl(["setup", "--dry-run", "--json"], cwd=project, env=env)
    assert json.loads(again.stdout)["plan"]["action"] == "build"  # the view runs on no GPU

    # the build plan: cargo in the dev container, against the CPU variant
    build = run_fdl(["build", "--dry-run"], cwd=project, env=env)
    assert build.exit_code == 0, build.output
    assert (
        "# runs in docker compose service dev (docker-compose.yml), in /workspace" in build.stdout
    )
    assert f"export LIBTORCH_CPU_PATH={project}/libtorch/precompiled/cpu\n" in build.stdout
    assert "-e LIBTORCH_PATH=/opt/libtorch" in build.stdout and "# note" not in build.stdout
    # the GPU commands (`docker: gpu`, resolved to cuda for an NVIDIA rig; floDl 0.8's
    # contract, branch contract-run) say their build is not there yet, and how to get it
    cuda = run_fdl(["gpu-train", "--dry-run"], cwd=project, env=env)
    assert cuda.exit_code == 0, cuda.output
    assert "# runs in docker compose service cuda (docker-compose.yml)" in cuda.stdout
    assert (
        "# note: service 'cuda' uses libtorch builds/sm61-sm120 (images.cuda.variant), which "
        "is not installed: fdl setup"
    ) in cuda.stdout
    # a GPU service is never given the active CPU variant over its image's own
    assert "(precompiled/cpu) is a CPU build and service 'cuda' has NVIDIA GPUs" in cuda.stdout
    assert "-e LIBTORCH=" not in cuda.stdout
    assert "export FDL_GPU_FEATURE=cuda\n" in cuda.stdout
    assert 'cargo run --release --features "$FDL_GPU_FEATURE" --' in cuda.stdout
    train = run_fdl(["train", "--dry-run", "--", "--epochs", "2"], cwd=project, env=env)
    assert train.exit_code == 0, train.output
    assert 'cargo run --release -- "$@"\'' in train.stdout
    assert train.stdout.rstrip().endswith("' --epochs 2")  # the script ($0), then its arguments


# The source build's plan asks for an engine: nvcc 13 (this machine's) cannot compile
# sm_61, so the plan builds in Docker, as the rig's user would.
@pytest.mark.docker
def test_flodl_user_on_the_mixed_rig_with_driver_560(
    tmp_path: Path, run_fdl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Driver 560 runs nothing on the RTX 5060 Ti (Blackwell needs R570): every step says
    the driver is the reason and the fix is a newer driver, never an older CUDA or cu126;
    the plan is the one the rig gets on 570."""
    env = rig(tmp_path, "560.35.03")
    made = run_fdl(["init", "my-model", "--yes"], cwd=tmp_path, env=env)
    assert made.exit_code == 0, made.output
    project = tmp_path / "my-model"
    manifest = (project / "fdl.yml").read_text()
    why = comment_above(manifest, "  cuda:")
    assert why.startswith("builds/sm61-sm120: sm_120 (Blackwell) needs driver >= 570")
    assert "this one is 560.35.03" in why and f"Get it with: {BUILD}" in why

    plan = run_fdl(["setup", "--dry-run"], cwd=project, env=env)
    assert plan.exit_code == 0, plan.output
    assert "GPU 0: NVIDIA GeForce GTX 1060 6GB, sm_61 (Pascal)\n" in plan.stdout
    assert (
        "GPU 1: NVIDIA GeForce RTX 5060 Ti, sm_120 (Blackwell): NOT SUPPORTED by driver "
        "560.35.03: upgrade the NVIDIA driver to 570 or newer"
    ) in plan.stdout
    (headline,) = lines_of(plan.stdout, "plan:")
    assert headline.startswith("plan: build: no official libtorch 2.10.0 covers sm_61 + sm_120")
    assert "(sm_120 (Blackwell) needs driver >= 570" in headline
    assert f"command:  {BUILD}\n" in plan.stdout
    warnings = lines_of(plan.stdout, "warning:")
    assert warnings[0].startswith("warning:  sm_120 (Blackwell) needs driver >= 570")
    assert "upgrade the NVIDIA driver to 570 or newer" in warnings[0]
    for wrong in ("CPU build", "older --cuda", "--cuda 12.6", "an older CUDA"):
        assert wrong not in plan.stdout, wrong

    diagnose = run_fdl(["diagnose"], cwd=project, env=env)
    gpu = re.search(r"error +GPU 1: .*\n +fix: (.*)\n", diagnose.stdout)
    assert gpu is not None, diagnose.stdout
    assert "sm_120 (Blackwell) needs driver >= 570" in gpu.group(0)
    assert gpu.group(1).startswith("upgrade the NVIDIA driver to 570 or newer")
    assert re.search(r"ok +GPU 0: NVIDIA GeForce GTX 1060", diagnose.stdout)

    # the source build's own plan (on a machine with room for it)
    import fdl.system

    room = fdl.system.Probe(200 << 30, path=str(project))
    monkeypatch.setattr(fdl.system, "disk_free", lambda _path: room)
    build_plan = run_fdl(["libtorch", "build", "--dry-run", "--json"], cwd=project, env=env)
    assert build_plan.exit_code == 0, build_plan.output
    problems = json.loads(build_plan.stdout)["problems"]
    (driver,) = [p for p in problems if p["check"] == "driver"]
    assert "sm_120 (Blackwell) needs driver >= 570" in driver["message"]
    assert driver["hint"].startswith("upgrade the NVIDIA driver to 570 or newer")
    assert "--cuda" not in driver["hint"]
    text = run_fdl(["libtorch", "build", "--dry-run"], cwd=project, env=env).stdout.splitlines()
    archs = next(i for i, line in enumerate(text) if line.startswith("  archs:"))
    assert text[archs + 1].startswith("  warning:   sm_120 (Blackwell) needs driver >= 570")

    train = run_fdl(["train", "--dry-run"], cwd=project, env=env)
    assert train.exit_code == 0, train.output


TCH_TOML = '[package]\nname = "mytch"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\ntch = "0.23.0"\n'
TCH_LOCK = (
    '# generated by Cargo\nversion = 4\n\n[[package]]\nname = "torch-sys"\nversion = "0.23.0"\n'
)
TCH_FDL = """commands:
  build:
    description: Build
    run: cargo build --release
  train:
    description: Train
    run: cargo run --release --
"""


def test_tch_rs_user_without_a_gpu(tmp_path: Path, run_fdl, index: PackageIndex) -> None:
    """A tch-rs crate (tch 0.23.0, whose torch-sys checks for torch 2.10.0) gets an fdl.yml
    of its own (fdl has no tch-rs template): setup and the plans follow the lock file."""
    env = machine(tmp_path)  # nvidia-smi lists no GPU
    project = tmp_path / "mytch"
    project.mkdir()
    (project / "Cargo.toml").write_text(TCH_TOML)
    (project / "Cargo.lock").write_text(TCH_LOCK)
    (project / "fdl.yml").write_text(TCH_FDL)

    plan = run_fdl(["setup", "--dry-run"], cwd=project, env=env)
    assert plan.exit_code == 0, plan.output
    assert "torch 2.10.0: tch-rs 0.23.0 compiles against torch 2.10.0" in plan.stdout
    assert "command:  fdl libtorch download --cpu --torch 2.10.0\n" in plan.stdout
    assert any("--from-wheel --cpu --torch 2.10.0" in o for o in lines_of(plan.stdout, "or:"))

    # nothing installed yet: the build says LIBTORCH is unset, and what would set it
    bare = run_fdl(["build", "--dry-run"], cwd=project, env=env)
    assert bare.exit_code == 0, bare.output
    assert (
        "# note: no active libtorch variant in "
        f"{project / 'libtorch'}: LIBTORCH is not set, and tch-rs 0.23.0 needs torch 2.10.0"
    ) in bare.stdout
    assert "export LIBTORCH=" not in bare.stdout

    # the CPU path for real (PyTorch's host out of reach, PyPI's CUDA wheel read by range)
    view = install_cpu_view(run_fdl, project, env, index)
    assert view["torch"] == TORCH and view["cuda"] is None
    variant = project / "libtorch" / "precompiled" / "cpu"
    build = run_fdl(["build", "--dry-run"], cwd=project, env=env)
    assert f"export LIBTORCH={variant}\n" in build.stdout
    assert "# note" not in build.stdout and "BYPASS" not in build.stdout
    assert (
        run_fdl(["setup", "--dry-run", "--json"], cwd=project, env=env).stdout.count(
            '"action": "keep"'
        )
        == 1
    )

    # a torch 2.13 variant made active by hand: torch-sys would refuse it
    tree = make_tree(tmp_path / "t213", "2.13.0+cpu")
    assert (
        run_fdl(["libtorch", "install", "--from-dir", str(tree)], cwd=project, env=env).exit_code
        == 0
    )
    wrong = run_fdl(["build", "--dry-run"], cwd=project, env=env)
    assert (
        "# note: the active libtorch precompiled/t213 is torch 2.13.0: tch-rs 0.23.0 compiles "
        "against torch 2.10.0 only (Cargo.lock:6:12)"
    ) in wrong.stdout
    ported = run_fdl(
        ["--set", "libtorch.framework-check=false", "train", "--dry-run", "--", "--steps", "3"],
        cwd=project,
        env=env,
    )
    assert ported.exit_code == 0, ported.output
    assert "export LIBTORCH_BYPASS_VERSION_CHECK=1\n" in ported.stdout
    assert "libtorch.framework-check is false" in ported.stdout
    assert ported.stdout.rstrip().endswith("sh --steps 3")


def test_setup_before_init_says_a_project_will_not_read_it(tmp_path: Path, run_fdl) -> None:
    """The order the README once gave (setup, then init) installed into $FDL_HOME, which a
    project never reads: setup outside a project says so and how to take a variant over."""
    env = rig(tmp_path, "570.86")
    (tmp_path / "elsewhere").mkdir()
    plan = run_fdl(["setup", "--dry-run"], cwd=tmp_path / "elsewhere", env=env)
    assert plan.exit_code == 0, plan.output
    home = tmp_path / "home" / "libtorch"
    assert (
        "(outside a project: a project reads its own libtorch/, not this one; run fdl setup in "
        f"it, or take a variant from here with fdl libtorch install --from-dir {home}/NAME)"
    ) in plan.stdout
