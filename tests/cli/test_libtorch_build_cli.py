"""``fdl libtorch build`` through the CLI: plans, refusals, exit codes, manifest layers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.artefacts import require_nvcc

FAKE_PYTORCH = Path(__file__).resolve().parent.parent / "fixtures" / "fake-pytorch"


def _nvcc_major() -> int | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"release (\d+)\.", out)
    return int(match.group(1)) if match else None


@pytest.fixture(autouse=True)
def room(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source build's preflight refuses under ~22 GB free; these tests are about plans,
    not this machine's disk (they failed once the disk had 21 GB free)."""
    import fdl.system

    plenty = fdl.system.Probe(200 << 30, path="/")
    monkeypatch.setattr(fdl.system, "disk_free", lambda _path: plenty)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}


def test_native_pascal_with_nvcc_13_is_refused_before_any_work(run_fdl, tmp_path, home) -> None:
    require_nvcc()
    if _nvcc_major() != 13:
        pytest.skip("needs nvcc 13.x (scripts/setup-machine.sh installs CUDA 13.0's)")
    result = run_fdl(
        ["libtorch", "build", "--archs", "6.1;12.0", "--native"], cwd=tmp_path, env=home
    )
    assert result.exit_code == 4, result.output
    assert "CUDA 13 dropped Pascal" in result.stderr
    # the same toolkit as the Docker plan (and fdl setup) picks, with the same reason
    assert "`--docker` (CUDA 12.9: the newest toolkit" in result.stderr
    assert "install CUDA 12.8 or 12.9" in result.stderr
    assert not (tmp_path / "home").exists()  # nothing was created, nothing ran


def test_cpu_dry_run_json_is_the_complete_plan(run_fdl, tmp_path, home) -> None:
    result = run_fdl(
        [
            "libtorch",
            "build",
            "--cpu",
            "--native",
            "--source",
            str(FAKE_PYTORCH),
            "--dry-run",
            "--json",
        ],
        cwd=tmp_path,
        env=home,
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["variant"] == "builds/cpu" and plan["backend"] == "native"
    assert plan["env"]["USE_CUDA"] == "0" and plan["env"]["MAX_JOBS"]
    assert plan["torch"] == "2.13.0"  # from the tree's version.txt
    build = plan["commands"][-1]
    assert build["what"] == "build" and build["argv"][-1].endswith("tools/build_libtorch.py")
    assert plan["estimates"]["disk_gb"] == 10.0  # the release's CPU build, not the tiny tree's
    assert not (tmp_path / "home" / "libtorch" / ".build-cache").exists()


def test_manifest_and_overlay_shape_the_build(run_fdl, tmp_path, home) -> None:
    source = tmp_path / "pytorch"
    shutil.copytree(FAKE_PYTORCH, source)
    (tmp_path / "fdl.yml").write_text(
        "libtorch:\n"
        "  build:\n"
        "    cpu: true\n"
        "    backend: native\n"
        "    source: pytorch\n"
        "    switches:\n"
        "      USE_DISTRIBUTED: 1\n"
        "      BUILD_TEST: true\n"
    )
    (tmp_path / "fdl.ci.yml").write_text(
        "libtorch:\n  build:\n    jobs: 1\n    switches:\n      USE_DISTRIBUTED: 0\n"
    )
    result = run_fdl(["@ci", "libtorch", "build", "--dry-run", "--json"], cwd=tmp_path, env=home)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["env"]["USE_DISTRIBUTED"] == "0" and plan["env"]["BUILD_TEST"] == "1"
    assert plan["env"]["MAX_JOBS"] == "1"
    assert plan["settings"]["jobs"]["origin"].startswith("fdl.ci.yml:3:")
    assert plan["paths"]["source"] == str(source)
    # inside a project, variants live in the project
    assert plan["output"] == str(tmp_path / "libtorch" / "builds" / "cpu")


def test_manifest_value_errors_name_file_and_line(run_fdl, tmp_path, home) -> None:
    (tmp_path / "fdl.yml").write_text(
        "libtorch:\n  build:\n    archs: '6.1;12.0'\n    cuda: '13.0'\n    backend: docker\n"
    )
    result = run_fdl(["libtorch", "build", "--dry-run"], cwd=tmp_path, env=home)
    assert result.exit_code == 4, result.output
    assert "fdl.yml:4:11: " in result.stderr
    assert "CUDA 13.0 cannot compile sm_61" in result.stderr


def test_recipe_errors_and_listing(run_fdl, tmp_path, home) -> None:
    listed = run_fdl(["libtorch", "build", "--list-recipes"], cwd=tmp_path, env=home)
    assert listed.exit_code == 0 and "pascal-blackwell" in listed.stdout
    unknown = run_fdl(
        ["libtorch", "build", "--recipe", "pascal", "--dry-run"], cwd=tmp_path, env=home
    )
    assert unknown.exit_code == 2 and "unknown build recipe 'pascal'" in unknown.stderr
    both = run_fdl(["libtorch", "build", "--docker", "--native"], cwd=tmp_path, env=home)
    assert both.exit_code == 2 and "exclude each other" in both.stderr


def test_impossible_archs_exit_2(run_fdl, tmp_path, home) -> None:
    result = run_fdl(
        ["libtorch", "build", "--archs", "3.5;12.0", "--native", "--dry-run"],
        cwd=tmp_path,
        env=home,
    )
    assert result.exit_code == 2
    assert "no CUDA toolkit can compile sm_35 + sm_120" in result.stderr


def test_recipe_and_options_are_layers_with_the_same_origins_as_config_explain(
    run_fdl, tmp_path, home
) -> None:
    """The recipe is the manifest's lowest layer and the options its top one: the plan's
    origins and `fdl config explain` name the same file:line."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "pinned.yml").write_text(
        'description: a pinned toolkit\narchs: "6.1;12.0"\ncuda: "12.8"\n'
    )
    (tmp_path / "fdl.yml").write_text("libtorch:\n  build:\n    recipe: pinned\n    jobs: 2\n")
    explained = run_fdl(
        ["config", "explain", "libtorch.build.cuda", "--json"], cwd=tmp_path, env=home
    )
    assert explained.exit_code == 0, explained.output
    winner = json.loads(explained.stdout)[0]["winner"]["origin"]
    assert winner["layer"] == "recipe" and winner["source"] == "recipes/pinned.yml"
    result = run_fdl(
        ["libtorch", "build", "--docker", "--archs", "12.0", "--dry-run", "--json"],
        cwd=tmp_path,
        env=home,
    )
    assert result.exit_code == 0, result.output
    settings = json.loads(result.stdout)["settings"]
    where = f"recipes/pinned.yml:{winner['line']}:{winner['column']}"
    assert settings["cuda"] == {"value": "12.8", "origin": f"{where} (cuda)"}
    assert settings["archs"] == {"value": "12.0", "origin": "--archs"}
    assert settings["jobs"]["origin"].startswith("fdl.yml:4:")
    # an unknown recipe in the manifest: config show still works, the build says where
    (tmp_path / "fdl.yml").write_text("libtorch:\n  build:\n    recipe: pascal-blackwel\n")
    assert run_fdl(["config", "show"], cwd=tmp_path, env=home).exit_code == 0
    refused = run_fdl(["libtorch", "build", "--dry-run"], cwd=tmp_path, env=home)
    assert refused.exit_code == 3 and "fdl.yml:3:13: unknown build recipe" in refused.stderr
