"""floDl CLI 0.8.0's run-time contract, fdl against the real ``flodl-cli`` 0.8.0 binary.

The projects are the three that floDl 0.8.0's ``fdl init`` writes (mounted, ``--docker``,
``--native``: its ``gpu-*`` commands say ``docker: gpu`` and ``--features
"$FDL_GPU_FEATURE"``), each with a CPU, a CUDA 12.6 and a ROCm 7.0 libtorch (floDl's
layout and ``.arch`` files), an overlay ``fdl.ci.yml``, a ``[[ ]]`` script (bash, not sh)
and a ``cluster: true`` command. Both CLIs run the same command lines under the recording
fakes of ``tests/support/reference_cli.py`` (a container's script runs under the shell it
names), and what the programs would run is compared as in ``test_reference_parity.py``:
``--gpus`` (``CUDA_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``, a cluster command's
``FLODL_INTERNAL_*`` envelope), ``FDL_GPU_FEATURE``, the service ``docker: gpu`` resolves
to, ``FDL_ENV``, ``HOSTNAME``.

floDl's CLI 0.8.0 is built by ``FDL_REFERENCE_VERSION=0.8.0 scripts/setup-reference-cli.sh``
(cargo install, several minutes on 2 cores, cached); the tests skip locally and fail in CI
without it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.integration.test_reference_parity import _variants
from tests.support.reference_cli import (
    CONTRACT_VERSION,
    Effect,
    Sandbox,
    describe,
    effects,
    reference_binary,
)

pytestmark = pytest.mark.slow

# What fdl gives a program that floDl's CLI 0.8.0 does not (docs/reference-parity.md).
EXTRA_VARIABLES = {
    "FDL_PROJECT_ROOT",  # floDl's CLI sets it for entries in containers only
    "LIBTORCH",  # tch-rs
    "LIBTORCH_PATH",  # floDl's CLI: native commands only
    "Torch_DIR",
    "CMAKE_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "CUDA_VERSION",  # floDl's CLI: compose only
    "CUDA_TAG",
    "LIBTORCH_CUDA_PATH",  # compose: the active CUDA variant
    "FDL_GPU_FEATURE",  # fdl passes it into the container with -e too
    "CUDA_VISIBLE_DEVICES",  # --gpus: fdl passes the masks into the container too
    "HIP_VISIBLE_DEVICES",
    "FDL_ENV",  # fdl passes it into the container too
    # a cluster command's envelope: floDl's CLI sets it for compose only (the container
    # gets it where the service lists it); fdl passes it by name (-e NAME) into the container
    "FLODL_INTERNAL_FULL_CLUSTER_JSON",
    "FLODL_INTERNAL_FDL_CMD",
    "FLODL_INTERNAL_HOST_USER",
    "FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS",
}

EXTRA_COMMANDS = """
  brackets:
    run: '[[ -n "$FDL_GPU_FEATURE" ]] && cargo build --features "$FDL_GPU_FEATURE"'
    docker: gpu
  train:
    run: cargo run --release
    cluster: true
  dtrain:
    run: cargo run --release
    cluster: true
    docker: cuda
"""


def _cluster_overlay(project: Path) -> str:
    """A ``cluster:`` block of one worker, this machine (so that floDl's CLI has no remote
    host to check or pre-build for), two explicit devices and what the reader orders."""
    return f"""\
cluster:
  controller: {{host: 127.0.0.1, port: 4000, path: {project}, join: {{start: auto, min_rank_start: 2}}}}
  env: {{NCCL_DEBUG: INFO, A_FIRST: "1"}}
  gpu_ram_share: 1
  workers:
    - host: {os.uname().nodename}
      local_devices: [1, 0]
      nccl_socket_ifname: lo
      path: {project}
      ssh: {{user: me, port: 2222}}
      env: {{Z: z}}
"""


def _rocm(project: Path) -> None:
    """floDl's ROCm 7.0 variant as its ``libtorch download --rocm 7.0`` lays it out."""
    variant = project / "libtorch" / "precompiled" / "rocm70"
    (variant / "lib").mkdir(parents=True, exist_ok=True)
    (variant / ".arch").write_text(
        "cuda=none\ntorch=2.10.0\narchs=gfx908 gfx90a gfx942 gfx1100\nsource=precompiled\n"
        "variant=rocm7.0\n"
    )


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    reference_binary(CONTRACT_VERSION)
    return Sandbox(tmp_path_factory.mktemp("sandbox-08"), CONTRACT_VERSION)


@pytest.fixture(scope="module")
def scaffolds(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    parent = tmp_path_factory.mktemp("reference-init-08")
    made: dict[str, Path] = {}
    for mode, flags in (("mounted", []), ("docker", ["--docker"]), ("native", ["--native"])):
        got = sandbox.reference(["init", f"ref-{mode}", *flags], parent)
        assert got.code == 0, got.output
        project = parent / f"ref-{mode}"
        manifest = (project / "fdl.yml.example").read_text(encoding="utf-8")
        if mode == "native":
            manifest += re.sub(r"    docker: \w+\n", "", EXTRA_COMMANDS)
        else:
            manifest += EXTRA_COMMANDS
        (project / "fdl.yml").write_text(manifest, encoding="utf-8")
        (project / "fdl.ci.yml").write_text("description: ci overlay\n", encoding="utf-8")
        (project / "fdl.cluster.yml").write_text(_cluster_overlay(project), encoding="utf-8")
        _variants(project)
        _rocm(project)
        made[mode] = project
    return made


def _normal(value: str) -> str:
    """floDl's CLI writes ``<root>/./libtorch/...`` (Path::join of ``./libtorch``)."""
    return re.sub(r"/\./", "/", value)


def _mismatches(ref: list[Effect], ours: list[Effect]) -> list[str]:
    if len(ref) != len(ours):
        return [
            "different programs:",
            *(f"  floDl: {describe(e)}" for e in ref),
            *(f"  fdl:   {describe(e)}" for e in ours),
        ]
    problems = []
    for theirs, mine in zip(ref, ours, strict=True):
        for what in ("where", "program", "argv", "cwd", "project"):
            if getattr(theirs, what) != getattr(mine, what):
                problems.append(
                    f"{what}: floDl {getattr(theirs, what)!r}, fdl {getattr(mine, what)!r}"
                )
        for scope in ("env", "compose"):
            have, want = getattr(mine, scope), getattr(theirs, scope)
            for key, value in want.items():
                if key == "LD_LIBRARY_PATH" or key.startswith("LIBTORCH"):
                    continue  # paths: test_reference_parity.py compares them
                if _normal(have.get(key, "")) != _normal(value):
                    problems.append(f"{scope} {key}: floDl {value!r}, fdl {have.get(key)!r}")
            extra = set(have) - set(want) - EXTRA_VARIABLES
            if extra:
                problems.append(f"{scope}: fdl adds {sorted(extra)}")
    return problems


def _same(sandbox: Sandbox, project: Path, args: list[str], *, container: bool) -> list[str]:
    ref = sandbox.reference(args, project, container=container)
    ours = sandbox.ours(args, project, container=container)
    if ref.code != ours.code:
        return [f"exit: floDl {ref.code}, fdl {ours.code}", ref.output[-400:], ours.output[-400:]]
    return _mismatches(effects(sandbox, ref.calls), effects(sandbox, ours.calls))


def _activate(project: Path, variant: str) -> None:
    (project / "libtorch" / ".active").write_text(variant)


CASES = [
    ["gpu-build"],
    ["gpu-test"],
    ["build"],
    ["brackets"],
    ["--gpus", "0,1", "test"],
    ["test", "--gpus", "1"],
    ["gpu-build", "--gpus=0,2"],
    ["@ci", "test"],
    ["--env", "ci", "gpu-build"],
    ["--gpus", "0,1", "train"],
    ["train", "--gpus", "3"],
    ["train"],
    ["--gpus", "0,1", "dtrain"],
    ["@cluster", "test"],
    ["@cluster", "train"],
    ["@cluster", "--no-prebuild", "dtrain"],
]


@pytest.mark.parametrize("variant", ["precompiled/cu126", "precompiled/rocm70", "precompiled/cpu"])
@pytest.mark.parametrize("container", [False, True], ids=["host", "container"])
@pytest.mark.parametrize("mode", ["mounted", "docker", "native"])
def test_the_run_time_contract_is_floDls(
    sandbox: Sandbox, scaffolds: dict[str, Path], mode: str, container: bool, variant: str
) -> None:
    project = scaffolds[mode]
    _activate(project, variant)
    failures = {}
    for args in CASES:
        if mode == "native" and args[-1] == "brackets":
            continue  # a native `run:` runs under sh in both CLIs
        problems = _same(sandbox, project, args, container=container)
        if problems:
            failures[" ".join(args)] = problems
    assert failures == {}


def test_bad_gpus_are_refused_by_both(sandbox: Sandbox, scaffolds: dict[str, Path]) -> None:
    project = scaffolds["mounted"]
    for spec in ("0,,1", "0,0", "x", ""):
        ref = sandbox.reference(["--gpus", spec, "test"], project)
        ours = sandbox.ours(["--gpus", spec, "test"], project)
        assert ref.code != 0 and ours.code != 0, (spec, ref.output, ours.output)
        assert ref.calls == [] and ours.calls == []


def test_a_script_in_a_container_runs_under_bash_in_both(
    sandbox: Sandbox, scaffolds: dict[str, Path]
) -> None:
    """floDl's CLI runs `bash -c`; fdl's `[[ ]]` exited 127 under sh before (the prologue)."""
    project = scaffolds["docker"]
    _activate(project, "precompiled/cu126")
    ours = effects(sandbox, sandbox.ours(["brackets"], project).calls)
    assert [(e.where, e.program, e.argv) for e in ours] == [
        ("service:cuda", "cargo", ("build", "--features", "cuda"))
    ]
    assert shutil.which("bash") is not None
