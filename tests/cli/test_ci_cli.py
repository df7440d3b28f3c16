"""``fdl ci matrix|generate|check`` and ``fdl image build --all`` through the CLI (the
engine is a FakeEngine here; real builds: tests/integration/test_ci_build_all.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.engine import Builder, set_default_engine
from fdl.runner import Completed, set_default_runner
from tests.support.ci import MATRIX, ci_project
from tests.support.fakes import FakeEngine, FakeRunner
from tests.support.images import make_variant

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return ci_project(tmp_path)


def test_matrix_json_has_every_cell_with_tag_and_args(run_fdl, project: Path) -> None:
    result = run_fdl(["ci", "matrix", "--json"], cwd=project)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [cell["id"] for cell in data["cells"]] == [
        "dev-cpu",
        "train-cpu",
        "dev-cu130",
        "train-cu130",
        "dev-pascal-blackwell",
        "train-pascal-blackwell",
    ]
    train = data["cells"][1]
    assert train["tag"] == "ghcr.io/acme/cpp-train-train:cpu-latest"
    assert train["args"]["LIBTORCH_IMAGE"] == "fdl-libtorch:cpp-train-precompiled-cpu"
    assert train["needs"] == ["libtorch-cpu"]
    assert data["variants"][2]["install"].startswith("fdl libtorch build --recipe pascal-blackwell")


def test_matrix_text_lists_variants_then_cells(run_fdl, project: Path) -> None:
    result = run_fdl(["ci", "matrix"], cwd=project)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.index("libtorch variants") < text.index("cells (profile x variant)")
    assert "install: fdl libtorch download --cuda 13.0 --torch 2.13.0 --no-activate" in text
    assert "--build-arg LIBTORCH_IMAGE=fdl-libtorch:cpp-train-builds-pascal-blackwell" in text


def test_matrix_and_dry_run_show_a_pushed_variant(run_fdl, tmp_path: Path) -> None:
    from tests.support.ci import PUSHED, PUSHED_MATRIX

    project = ci_project(tmp_path, PUSHED_MATRIX)
    data = json.loads(run_fdl(["ci", "matrix", "--json"], cwd=project).stdout)
    pushed = data["variants"][2]
    assert pushed["pushed"] == PUSHED and pushed["cache_key"] is None
    assert pushed["install"].startswith(f"fdl libtorch pull {PUSHED} --name builds/")
    assert f"copied from {PUSHED} (ci.pushed)" in run_fdl(["ci", "matrix"], cwd=project).stdout
    dry = run_fdl(["ci", "generate", "--dry-run"], cwd=project)
    assert dry.exit_code == 0, dry.output
    assert "would write ci/dockerfiles/libtorch-pascal-blackwell.Dockerfile" in dry.stdout
    assert f"build:pascal-blackwell: copied from {PUSHED} (ci.pushed)" in dry.stderr
    assert not (project / "ci").exists()


def test_pushed_without_a_team_registry_says_how_to_name_one(
    run_fdl, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FDL_LIBTORCH_REGISTRY", raising=False)
    result = run_fdl(["ci", "pushed"], cwd=project)
    assert result.exit_code == 2, result.output
    assert "no team registry to look in" in result.stderr
    assert "fdl ci pushed --registry" in result.stderr


def test_check_passes_after_generate_then_fails_with_a_diff(run_fdl, project: Path) -> None:
    result = run_fdl(["ci", "generate"], cwd=project)
    assert result.exit_code == 0, result.output
    assert "wrote ci/docker-bake.hcl" in result.stderr
    assert (project / ".github/workflows/fdl-images.yml").is_file()
    assert run_fdl(["ci", "check"], cwd=project).exit_code == 0
    again = run_fdl(["ci", "generate"], cwd=project)
    assert "17 files unchanged" in again.stderr and "wrote" not in again.stderr

    manifest = project / "fdl.yml"
    manifest.write_text(MATRIX.replace("[cpu, cu130,", "[cpu, cu126,"), encoding="utf-8")
    result = run_fdl(["ci", "check"], cwd=project)
    assert result.exit_code == 1
    assert "--- a/ci/docker-bake.hcl" in result.stdout
    assert '-target "train-cu130" {' in result.stdout
    assert '+target "train-cu126" {' in result.stdout
    assert "+++ /dev/null" in result.stdout  # the cu130 Dockerfiles are stale
    assert "generated files differ from what fdl.yml makes now" in result.stderr
    assert "fix: run `fdl ci generate` and commit the result" in result.stderr

    before = sorted(p.relative_to(project) for p in project.rglob("*") if p.is_file())
    dry = run_fdl(["ci", "generate", "--dry-run"], cwd=project)
    assert dry.exit_code == 0
    assert "would delete ci/dockerfiles/train-cu130.Dockerfile" in dry.stdout
    assert "would write ci/dockerfiles/train-cu126.Dockerfile" in dry.stdout
    assert "would update ci/docker-bake.hcl" in dry.stdout
    assert sorted(p.relative_to(project) for p in project.rglob("*") if p.is_file()) == before
    assert run_fdl(["ci", "generate"], cwd=project).exit_code == 0
    assert run_fdl(["ci", "check"], cwd=project).exit_code == 0
    assert not (project / "ci/dockerfiles/train-cu130.Dockerfile").exists()


def test_generate_never_overwrites_or_removes_files_it_did_not_write(
    run_fdl, project: Path
) -> None:
    workflow = project / ".github/workflows/fdl-images.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("# my own workflow\non: push\n", encoding="utf-8")
    mine = project / "ci/dockerfiles/handmade.Dockerfile"
    mine.parent.mkdir(parents=True)
    mine.write_text("FROM scratch\n", encoding="utf-8")
    refused = run_fdl(["ci", "generate"], cwd=project)
    assert refused.exit_code == 2, refused.output
    assert ".github/workflows/fdl-images.yml" in refused.stderr and "--force" in refused.stderr
    assert workflow.read_text() == "# my own workflow\non: push\n"
    assert not (project / "ci/docker-bake.hcl").exists(), "wrote part of the files"
    forced = run_fdl(["ci", "generate", "--force"], cwd=project)
    assert forced.exit_code == 0, forced.output
    assert "Generated by fdl ci generate" in workflow.read_text()
    # a Dockerfile of the user's in the generated directory is never taken for a stale one
    assert mine.read_text() == "FROM scratch\n"
    assert "handmade" not in run_fdl(["ci", "check"], cwd=project).output


def test_output_directory_keeps_the_layout(run_fdl, project: Path, tmp_path: Path) -> None:
    result = run_fdl(["ci", "generate", "-o", str(tmp_path / "preview")], cwd=project)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "preview/ci/docker-bake.hcl").is_file()
    assert not (project / "ci").exists()
    assert run_fdl(["ci", "check", "-o", str(tmp_path / "preview")], cwd=project).exit_code == 0
    assert run_fdl(["ci", "check"], cwd=project).exit_code == 1  # nothing in the project


def test_manifest_errors_exit_3_with_the_line(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_text(MATRIX.replace("cu130", "cu999"), encoding="utf-8")
    result = run_fdl(["ci", "matrix"], cwd=project)
    assert result.exit_code == 3
    assert "fdl.yml:10:" in result.stderr and "no official cu999 build" in result.stderr


def test_unknown_keys_of_the_section_are_schema_errors(run_fdl, project: Path) -> None:
    (project / "fdl.yml").write_text(MATRIX.replace("  tests:", "  test:"), encoding="utf-8")
    result = run_fdl(["ci", "check"], cwd=project)
    assert result.exit_code == 3
    assert "did you mean 'tests'" in result.stderr


def test_the_repository_matrix_is_current(run_fdl) -> None:
    """fdl's own fdl.yml declares its image matrix; the checked-in files match it."""
    result = run_fdl(["ci", "check"], cwd=REPO)
    assert result.exit_code == 0, result.stdout[-3000:] + result.stderr


# --- fdl image build --all ---------------------------------------------------------------


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    from fdl import engine as module

    saved = list(module._DEFAULT)
    fake = FakeEngine()
    set_default_engine(fake)
    yield fake
    module._DEFAULT[:] = saved


CPU_ONLY = MATRIX.replace("[cpu, cu130, build:pascal-blackwell]", "[cpu]")


def test_build_all_builds_the_libtorch_image_before_the_cells(
    run_fdl, tmp_path: Path, engine: FakeEngine
) -> None:
    project = ci_project(tmp_path, CPU_ONLY)
    make_variant(project)
    result = run_fdl(["image", "build", "--all", "--json"], cwd=project)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["method"] == "engine"
    assert [(s["kind"], s["name"]) for s in data["steps"]] == [
        ("libtorch", "precompiled/cpu"),
        ("cell", "dev-cpu"),
        ("cell", "train-cpu"),
    ]
    libtorch, dev, train = engine.builds
    assert libtorch.tags[0].startswith("fdl-libtorch:precompiled-cpu-")
    assert dev.tags == ("ghcr.io/acme/cpp-train-dev:cpu-latest",)
    assert train.build_args == {"LIBTORCH_IMAGE": libtorch.tags[0]}
    assert train.cache_from == ("type=registry,ref=ghcr.io/acme/cpp-train-cache:train-cpu",)
    assert (project / ".dockerignore").is_file()


def test_build_all_names_the_install_commands_of_missing_variants(
    run_fdl, project: Path, engine: FakeEngine
) -> None:
    result = run_fdl(["image", "build", "--all"], cwd=project)
    assert result.exit_code == 2
    assert "not installed" in result.stderr
    assert "fdl libtorch download --cpu --torch 2.13.0 --no-activate" in result.stderr
    assert "fdl libtorch build --recipe pascal-blackwell --docker" in result.stderr
    assert engine.builds == []


def test_build_all_refuses_a_variant_of_another_release(
    run_fdl, tmp_path: Path, engine: FakeEngine
) -> None:
    project = ci_project(tmp_path, CPU_ONLY)
    make_variant(project, torch="2.14.1")
    result = run_fdl(["image", "build", "--all"], cwd=project)
    assert result.exit_code == 2
    assert "the matrix wants torch 2.13.0" in result.stderr
    assert "--force" in result.stderr


def test_build_all_takes_no_profiles(run_fdl, project: Path, engine: FakeEngine) -> None:
    result = run_fdl(["image", "build", "--all", "train"], cwd=project)
    assert result.exit_code == 2
    assert "--all builds the whole ci: matrix" in result.stderr


def test_build_all_uses_the_generated_bake_file_with_buildx(
    run_fdl, tmp_path: Path, engine: FakeEngine
) -> None:
    from fdl import runner as module

    project = ci_project(tmp_path, CPU_ONLY)
    make_variant(project)
    engine.builder = Builder.BUILDX
    fake = FakeRunner({("/usr/bin/docker", "buildx", "bake"): Completed([], 0, "#1 DONE\n")})
    saved = list(module._DEFAULT)
    set_default_runner(fake)
    try:
        stale = run_fdl(["image", "build", "--all", "--json"], cwd=project)
        assert json.loads(stale.stdout)["method"] == "engine"  # no generated files yet
        assert run_fdl(["ci", "generate"], cwd=project).exit_code == 0
        result = run_fdl(["image", "build", "--all", "--json"], cwd=project)
    finally:
        module._DEFAULT[:] = saved
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["method"] == "bake"
    assert fake.calls == [
        [
            "/usr/bin/docker",
            "buildx",
            "bake",
            "--file",
            "ci/docker-bake.hcl",
            "--progress",
            "plain",
            "dev-cpu",
            "train-cpu",
        ]
    ]


def test_build_all_push_pushes_the_cells_only(run_fdl, tmp_path: Path, engine: FakeEngine) -> None:
    project = ci_project(tmp_path, CPU_ONLY)
    make_variant(project)
    result = run_fdl(["image", "build", "--all", "--push"], cwd=project)
    assert result.exit_code == 0, result.output
    assert engine.pushed == [
        "ghcr.io/acme/cpp-train-dev:cpu-latest",
        "ghcr.io/acme/cpp-train-train:cpu-latest",
    ]
    assert "cell train-cpu: ghcr.io/acme/cpp-train-train:cpu-latest" in result.stdout
    assert result.stdout.splitlines()[0].startswith("libtorch image precompiled/cpu: ")
