"""The generated files: the bake file parses as HCL and wires every cell to its libtorch
image, the workflow validates against GitHub's workflow schema and does what it says
(clean-up for CUDA only, push on the push branch only, every image tested)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fdl.ci import Matrix, generated_files, render_bake, render_workflow
from fdl.ci._text import yaml_scalar
from tests.support.ci import MATRIX, ci_project, plan


@pytest.fixture
def matrix(tmp_path: Path) -> Matrix:
    return plan(ci_project(tmp_path))


def _unquote(value: Any) -> Any:
    """python-hcl2 keeps the quotes of string literals."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [_unquote(item) for item in value]
    if isinstance(value, dict):
        return {_unquote(k): _unquote(v) for k, v in value.items() if k != "__is_block__"}
    return value


def _bake(text: str) -> dict[str, Any]:
    import hcl2

    parsed = hcl2.loads(text)
    blocks: dict[str, Any] = {"target": {}, "group": {}, "variable": {}}
    for kind, found in blocks.items():
        for block in parsed.get(kind, []):
            for name, body in block.items():
                found[_unquote(name)] = _unquote(body)
    return blocks


def test_the_bake_file_parses_and_wires_cells_to_their_libtorch_image(matrix: Matrix) -> None:
    bake = _bake(render_bake(matrix))
    targets, groups = bake["target"], bake["group"]
    assert groups["default"]["targets"] == [cell.id for cell in matrix.cells]
    assert groups["cu130"]["targets"] == ["dev-cu130", "train-cu130"]
    assert set(targets) == {cell.id for cell in matrix.cells} | {
        "libtorch-cpu",
        "libtorch-cu130",
        "libtorch-pascal-blackwell",
    }
    train = targets["train-pascal-blackwell"]
    assert train["contexts"] == {
        "fdl-libtorch:cpp-train-builds-pascal-blackwell": "target:libtorch-pascal-blackwell"
    }
    assert train["args"]["LIBTORCH_IMAGE"] == "fdl-libtorch:cpp-train-builds-pascal-blackwell"
    assert train["tags"] == ["ghcr.io/acme/cpp-train-train:pascal-blackwell-latest"]
    assert train["output"] == ["type=docker"]
    assert "contexts" not in targets["dev-cpu"]
    libtorch = targets["libtorch-cu130"]
    assert libtorch["context"] == "libtorch/precompiled/cu130"
    # bake reads a target's Dockerfile relative to its context.
    assert libtorch["dockerfile"] == "../../../ci/dockerfiles/libtorch-cu130.Dockerfile"
    assert bake["variable"]["CACHE_EXPORT"]["default"] == ""


def test_cache_export_is_switched_by_a_variable(matrix: Matrix) -> None:
    target = _bake(render_bake(matrix))["target"]["train-cpu"]
    assert target["cache-from"] == ["type=registry,ref=ghcr.io/acme/cpp-train-cache:train-cpu"]
    assert target["cache-to"].startswith('${CACHE_EXPORT == "1" ?')
    assert "cpp-train-cache:train-cpu,mode=max" in target["cache-to"]


def _check_jsonschema() -> str:
    found = shutil.which("check-jsonschema") or str(
        Path(sys.executable).with_name("check-jsonschema")
    )
    if not Path(found).exists():
        pytest.fail("check-jsonschema is not installed (pip install check-jsonschema)")
    return found


def test_the_workflow_validates_against_githubs_schema(matrix: Matrix, tmp_path: Path) -> None:
    path = tmp_path / "workflow.yml"
    path.write_text(render_workflow(matrix), encoding="utf-8")
    done = subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _workflow(matrix: Matrix) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(render_workflow(matrix))
    return loaded


def _runs(job: dict[str, Any]) -> list[str]:
    return [step.get("run", "") for step in job["steps"]]


def test_jobs_follow_the_dependencies(matrix: Matrix) -> None:
    jobs = _workflow(matrix)["jobs"]
    assert list(jobs) == [
        "generated",
        "libtorch-pascal-blackwell",
        "images-cpu",
        "images-cu130",
        "images-pascal-blackwell",
    ]
    assert jobs["images-pascal-blackwell"]["needs"] == ["generated", "libtorch-pascal-blackwell"]
    assert jobs["images-cpu"]["needs"] == ["generated"]
    source = jobs["libtorch-pascal-blackwell"]
    cache = next(step for step in source["steps"] if step.get("id") == "cache")
    assert cache["with"]["key"] == matrix.variants[2].cache_key
    assert cache["with"]["path"] == "libtorch/builds/pascal-blackwell"
    build = source["steps"][-1]
    assert build["if"] == "steps.cache.outputs.cache-hit != 'true'"
    assert "fdl libtorch build --recipe pascal-blackwell --docker" in build["run"]
    restore = jobs["images-pascal-blackwell"]["steps"]
    assert any(step.get("with", {}).get("fail-on-cache-miss") == "true" for step in restore)


def test_disk_clean_up_only_for_cuda_on_hosted_runners(matrix: Matrix) -> None:
    jobs = _workflow(matrix)["jobs"]

    def cleans(job: str) -> bool:
        return any("sudo rm -rf /usr/share/dotnet" in run for run in _runs(jobs[job]))

    assert not cleans("images-cpu")
    assert cleans("images-cu130") and cleans("images-pascal-blackwell")
    assert cleans("libtorch-pascal-blackwell")
    clean = next(r for r in _runs(jobs["images-cu130"]) if "sudo rm -rf" in r)
    assert clean.startswith("df -h /") and clean.rstrip().endswith("df -h /")


def test_self_hosted_runners_are_not_cleaned(tmp_path: Path) -> None:
    manifest = MATRIX.replace("ci:\n", "ci:\n  runner: [self-hosted, gpu]\n")
    jobs = _workflow(plan(ci_project(tmp_path, manifest)))["jobs"]
    assert jobs["images-cu130"]["runs-on"] == ["self-hosted", "gpu"]
    assert not any("sudo rm -rf" in run for run in _runs(jobs["images-cu130"]))


def test_push_only_on_the_push_branch_and_every_image_tested(matrix: Matrix) -> None:
    workflow = _workflow(matrix)
    condition = workflow["env"]["FDL_PUSH"]
    assert "github.ref == 'refs/heads/main'" in condition
    assert "github.event_name == 'push'" in condition
    job = workflow["jobs"]["images-cu130"]
    push = next(step for step in job["steps"] if step["name"] == "Push")
    assert push["if"] == "env.FDL_PUSH == 'true'"
    assert push["run"].split("\n")[:2] == [
        "docker push ghcr.io/acme/cpp-train-dev:cu130-latest",
        "docker push ghcr.io/acme/cpp-train-train:cu130-latest",
    ]
    bake = next(step for step in job["steps"] if "buildx bake" in step.get("run", ""))
    assert bake["run"] == "docker buildx bake --file ci/docker-bake.hcl --progress plain cu130"
    assert bake["env"]["CACHE_EXPORT"] == "${{ env.FDL_PUSH == 'true' && '1' || '' }}"
    tests = [run for run in _runs(job) if run.startswith("docker run")]
    assert tests == [
        "docker run --rm ghcr.io/acme/cpp-train-dev:cu130-latest cmake --version",
        "docker run --rm ghcr.io/acme/cpp-train-train:cu130-latest --steps 2",
    ]
    triggers = workflow.get("on", workflow.get(True))  # PyYAML reads `on` as YAML 1.1 true
    assert triggers["push"]["branches"] == ["main"]


def test_without_a_registry_nothing_is_pushed(tmp_path: Path) -> None:
    manifest = MATRIX.replace("  registry: ghcr.io/acme\n", "")
    workflow = _workflow(plan(ci_project(tmp_path, manifest)))
    assert "env" not in workflow
    assert workflow["permissions"] == {"contents": "read"}
    steps = [step["name"] for job in workflow["jobs"].values() for step in job["steps"]]
    assert "Push" not in steps and not any(name.startswith("Log in") for name in steps)


def test_a_project_below_the_repository_root(tmp_path: Path) -> None:
    from fdl.ci import plan_matrix
    from fdl.manifest import load_manifest

    project = ci_project(tmp_path / "repo" / "services")
    matrix = plan_matrix(load_manifest(project), repo_root=tmp_path / "repo")
    workflow = _workflow(matrix)
    assert workflow["defaults"]["run"]["working-directory"] == "services/cpp-train"
    cache = workflow["jobs"]["libtorch-pascal-blackwell"]["steps"][1]
    assert cache["with"]["path"] == "services/cpp-train/libtorch/builds/pascal-blackwell"
    paths = [item.path for item in generated_files(matrix)]
    assert "services/cpp-train/ci/docker-bake.hcl" in paths
    assert ".github/workflows/fdl-images.yml" in paths


def test_rendering_is_deterministic_and_holds_no_host_paths(tmp_path: Path) -> None:
    one = generated_files(plan(ci_project(tmp_path / "a")))
    two = generated_files(plan(ci_project(tmp_path / "b")))
    assert [(f.path, f.text) for f in one] == [(f.path, f.text) for f in two]
    for item in one:
        assert str(tmp_path) not in item.text
        assert item.text.startswith(
            "# Generated by fdl ci generate from fdl.yml - do not edit; run fdl ci generate\n"
        )


def test_files_of_an_overlay_name_it_in_the_command(tmp_path: Path) -> None:
    project = ci_project(tmp_path)
    (project / "fdl.ci.yml").write_text("ci:\n  version: nightly\n", encoding="utf-8")
    from fdl.ci import plan_matrix
    from fdl.manifest import load_manifest

    matrix = plan_matrix(load_manifest(project, env="ci"), repo_root=project, env="ci")
    assert matrix.cells[0].tag.endswith(":cpu-nightly")
    first = render_bake(matrix).splitlines()[0]
    assert first.endswith("from fdl.yml + fdl.ci.yml - do not edit; run fdl --env ci ci generate")
    assert "run: fdl --env ci ci check" in render_workflow(matrix)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_yaml_scalars_read_back_as_the_same_string(text: str) -> None:
    loaded = yaml.safe_load(f"key: {yaml_scalar(text)}\n")
    assert loaded["key"] == text


def test_build_secrets_reach_bake_and_come_from_repository_secrets(tmp_path: Path) -> None:
    manifest = MATRIX.replace(
        '    args: [--steps, "20"]\n',
        '    args: [--steps, "20"]\n    secrets: {pip_token: {env: PIP_TOKEN}}\n',
    )
    matrix = plan(ci_project(tmp_path, manifest))
    target = _bake(render_bake(matrix))["target"]["train-cpu"]
    assert target["secret"] == ["id=pip_token,env=PIP_TOKEN"]
    assert "secret" not in _bake(render_bake(matrix))["target"]["dev-cpu"]
    job = _workflow(matrix)["jobs"]["images-cpu"]
    bake = next(step for step in job["steps"] if "buildx bake" in step.get("run", ""))
    assert bake["env"]["PIP_TOKEN"] == "${{ secrets.PIP_TOKEN }}"


def test_a_pushed_variant_is_copied_from_its_image_and_never_built(tmp_path: Path) -> None:
    from tests.support.ci import PUSHED, PUSHED_MATRIX

    planned = plan(ci_project(tmp_path, PUSHED_MATRIX))
    files = {item.path: item.text for item in generated_files(planned)}
    libtorch = files["ci/dockerfiles/libtorch-pascal-blackwell.Dockerfile"]
    assert (
        f"FROM {PUSHED} AS pushed\nFROM scratch\nCOPY --from=pushed /libtorch /opt/libtorch/\n"
        in (libtorch)
    )
    assert "COPY . " not in libtorch
    assert "COPY . " in files["ci/dockerfiles/libtorch-cu130.Dockerfile"]  # the others as before
    target = _bake(files["ci/docker-bake.hcl"])["target"]["libtorch-pascal-blackwell"]
    assert target["context"] == "ci/dockerfiles"  # checked in: nothing read from the runner
    assert f"ci/dockerfiles/{target['dockerfile']}" in files
    workflow = _workflow(planned)
    assert "libtorch-pascal-blackwell" not in workflow["jobs"]  # no source build job
    job = workflow["jobs"]["images-pascal-blackwell"]
    assert job["needs"] == ["generated"]
    assert not any("fdl" in run for run in _runs(job))  # no install, no fdl on the runner
    assert not any("cache" in step.get("uses", "") for step in job["steps"])
    logins = [step["with"]["registry"] for step in job["steps"] if "login" in step.get("uses", "")]
    assert logins == ["ghcr.io", "registry.example.com"]  # a private team registry is read
    path = tmp_path / "workflow.yml"
    path.write_text(render_workflow(planned), encoding="utf-8")
    done = subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
