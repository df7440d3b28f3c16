"""`fdl nccl build` at the command line: the plan matched to the active libtorch and the
GPUs here, bad input refused with its exit code and nothing written, and `fdl probe`
holding the rig to the NCCL the build installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_probe_cli import _variant, machine  # noqa: F401 (the fixture)
from tests.support.fake_nccl import fake_libnccl, fake_nccl_tree


def _banner(variant: Path, version: str) -> None:
    text = b"NCCL version 2.18.0 or later\0" + f"NCCL version {version}+cuda12.9\0".encode()
    (variant / "lib" / "libtorch_cuda.so").write_bytes(b"\x7fELF" + bytes(4096) + text)


def test_the_plan_follows_the_libtorch_and_the_rig(run_fdl, machine) -> None:  # noqa: F811
    root, env = machine
    variant = _variant(root, "builds/sm61-sm120", "2.10.0+cu129", "12.9", cubins=(61, 120))
    _banner(variant, "2.26.2")
    result = run_fdl(["nccl", "build", "--dry-run", "--json"], cwd=root / "work", env=env)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert (plan["tag"], plan["tag_from"]) == ("v2.26.2-1", str(variant / "lib/libtorch_cuda.so"))
    assert (plan["archs"], plan["archs_from"]) == (["sm_61", "sm_120"], "the GPUs here")
    assert plan["base_image"] == "nvidia/cuda:12.9.1-devel-ubuntu24.04"
    assert plan["output"] == str(root / "home/libtorch/nccl/builds/v2.26.2-sm61-sm120")
    assert plan["variant"] == "builds/sm61-sm120"
    assert not (root / "home" / "libtorch" / "nccl").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--tag", "v2.27.5-1;touch /tmp/x"], "is not an NCCL git tag"),
        (["--tag", "$(reboot)"], "is not an NCCL git tag"),
        (["--archs", "6.1;not-an-arch"], "not-an-arch"),
        (["--source", "{empty}"], "no Makefile there"),
        (["--jobs", "0"], "out of range"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(run_fdl, machine, args, words) -> None:  # noqa: F811
    root, env = machine
    _variant(root, "builds/sm61-sm120", "2.10.0+cu129", "12.9", cubins=(61, 120))
    (root / "empty").mkdir()
    args = [a.replace("{empty}", str(root / "empty")) for a in args]
    before = sorted(p for p in root.rglob("*"))
    result = run_fdl(["nccl", "build", *args], cwd=root / "work", env=env)
    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert sorted(p for p in root.rglob("*")) == before


def test_probe_holds_the_rig_to_the_built_nccl(run_fdl, machine) -> None:  # noqa: F811
    root, env = machine
    # the variant's own NCCL lacks sm_61 (as the cu13 wheels do): not ready
    _variant(root, "builds/sm61-sm120", "2.10.0+cu129", "12.9", cubins=(61, 120), nccl=(75, 120))
    args = ["probe", "--json", "--data-path", str(root / "data")]
    before = json.loads(run_fdl(args, cwd=root / "work", env=env).stdout)
    assert any("has no code for GPU 0 (sm_61)" in issue for issue in before["issues"]), before[
        "issues"
    ]
    build = root / "home/libtorch/nccl/builds/v2.27.5-sm61-sm120"
    (build / "lib").mkdir(parents=True)
    (build / "lib" / "libnccl.so.2").write_bytes(fake_libnccl(["sm_61", "sm_120"]))
    record = {"tag": "v2.27.5-1", "version": "2.27.5", "variant": "builds/sm61-sm120"}
    (build / "nccl.json").write_text(json.dumps(record))
    after = run_fdl(args, cwd=root / "work", env=env)
    report = json.loads(after.stdout)
    assert report["nccl"]["where"] == "fdl nccl build"
    assert report["nccl"]["cubins"] == ["sm_61", "sm_120"]
    assert not [i for i in report["issues"] if "NCCL" in i or "nccl" in i], report["issues"]


def test_nccl_is_no_longer_a_floDl_only_command(run_fdl, tmp_path: Path) -> None:
    result = run_fdl(["nccl", "--help"], cwd=tmp_path, env={"FDL_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert "build" in result.stdout and "floDl's CLI" not in result.output
    assert fake_nccl_tree  # the tree the Docker tests build (tests/integration)


def test_a_project_command_runs_with_the_built_nccl_preloaded(tmp_path: Path, fdl_process) -> None:
    from tests.support.tasks_helpers import fake_libtorch, last_json, write

    show = "import json, os\nprint(json.dumps({k: os.environ.get(k) for k in ('LD_PRELOAD', 'LD_LIBRARY_PATH')}))\n"
    project = write(
        tmp_path, {"show.py": show, "fdl.yml": "commands:\n  argv: {run: python3 show.py}\n"}
    )
    variant = fake_libtorch(project)
    build = project / "libtorch/nccl/builds/v2.27.5-sm61-sm120"
    (build / "lib").mkdir(parents=True)
    # a real loadable library is not needed: the loader says it ignores this one, and runs
    (build / "lib" / "libnccl.so.2").write_bytes(fake_libnccl(["sm_61", "sm_120"]))
    record = {"tag": "v2.27.5-1", "version": "2.27.5", "variant": "precompiled/cu128"}
    (build / "nccl.json").write_text(json.dumps(record))
    result = fdl_process(["argv"], cwd=project, env={"LD_LIBRARY_PATH": "/usr/local/lib"})
    env = last_json(result.stdout)
    assert env["LD_PRELOAD"].split(":")[0] == f"{build}/lib/libnccl.so.2"
    assert env["LD_LIBRARY_PATH"] == f"{build}/lib:{variant}/lib:/usr/local/lib"
