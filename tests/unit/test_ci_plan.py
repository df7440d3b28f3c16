"""The matrix planner: cells, tags, build arguments, dependencies, cache scopes, and the
errors a user sees for a matrix that cannot be built."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.ci import Matrix
from fdl.ci._data import ci_data
from fdl.errors import ManifestError
from tests.support.ci import MATRIX, ci_project, plan


@pytest.fixture
def matrix(tmp_path: Path) -> Matrix:
    return plan(ci_project(tmp_path))


def test_cells_are_profiles_times_variants_in_build_order(matrix: Matrix) -> None:
    assert [variant.key for variant in matrix.variants] == [
        "cpu",
        "cu130",
        "build:pascal-blackwell",
    ]
    assert [cell.id for cell in matrix.cells] == [
        "dev-cpu",
        "train-cpu",
        "dev-cu130",
        "train-cu130",
        "dev-pascal-blackwell",
        "train-pascal-blackwell",
    ]


def test_tags_follow_the_default_scheme(matrix: Matrix) -> None:
    tags = {cell.id: cell.tag for cell in matrix.cells}
    assert tags["train-cpu"] == "ghcr.io/acme/cpp-train-train:cpu-latest"
    assert tags["dev-pascal-blackwell"] == "ghcr.io/acme/cpp-train-dev:pascal-blackwell-latest"
    assert all(cell.spec.tag == cell.tag for cell in matrix.cells)


def test_official_variants_come_from_the_compatibility_tables(matrix: Matrix) -> None:
    cpu, cuda, built = matrix.variants
    assert (cpu.name, cpu.torch, cpu.cuda, cpu.ref.archs) == ("precompiled/cpu", "2.13.0", None, ())
    assert (cuda.name, cuda.torch, cuda.cuda) == ("precompiled/cu130", "2.13.0", "13.0")
    assert "sm_120" in cuda.ref.archs and "sm_61" not in cuda.ref.archs
    assert cuda.install == (
        "fdl",
        "libtorch",
        "download",
        "--cuda",
        "13.0",
        "--torch",
        "2.13.0",
        "--no-activate",
    )
    assert cpu.install[3] == "--cpu"
    # The recipe pins neither torch nor CUDA: the project's torch, and the toolkit the build
    # plan picks for it (12.9: the newest that still compiles sm_61).
    assert (built.name, built.torch, built.cuda, built.ref.archs) == (
        "builds/pascal-blackwell",
        "2.13.0",
        "12.9",
        ("sm_61", "sm_120"),
    )
    assert built.install[:5] == ("fdl", "libtorch", "build", "--recipe", "pascal-blackwell")
    assert "--docker" in built.install and built.cache_key is not None


def test_build_args_and_dependencies(matrix: Matrix) -> None:
    cells = {cell.id: cell for cell in matrix.cells}
    train = cells["train-cu130"]
    assert dict(train.args) == {
        "BASE_IMAGE": "nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04",
        "BUILD_BASE_IMAGE": "nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04",
        "LIBTORCH_IMAGE": "fdl-libtorch:cpp-train-precompiled-cu130",
    }
    assert train.needs == ("libtorch-cu130",)
    # A dev image mounts libtorch at run time: it reads no libtorch image.
    dev = cells["dev-cu130"]
    assert dict(dev.args) == {"BASE_IMAGE": "nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04"}
    assert dev.needs == ()
    assert cells["train-pascal-blackwell"].spec.build_env == (("TORCH_CUDA_ARCH_LIST", "6.1;12.0"),)


def test_each_cell_has_its_own_cache_scope(matrix: Matrix) -> None:
    refs = [cell.cache_from[0] for cell in matrix.cells]
    assert len(set(refs)) == len(refs)
    train = next(cell for cell in matrix.cells if cell.id == "train-cpu")
    assert train.cache_from == ("type=registry,ref=ghcr.io/acme/cpp-train-cache:train-cpu",)
    assert train.cache_to == ("type=registry,ref=ghcr.io/acme/cpp-train-cache:train-cpu,mode=max",)


def test_tests_default_per_kind_and_follow_the_manifest(matrix: Matrix) -> None:
    tests = {cell.id: cell.test for cell in matrix.cells}
    assert tests["dev-cpu"] == ci_data().default_test("dev") == ("cmake", "--version")
    assert tests["train-cpu"] == ("--steps", "2")


def test_gha_cache_and_no_registry(tmp_path: Path) -> None:
    manifest = MATRIX.replace("  registry: ghcr.io/acme\n", "  cache: {gha: true, mode: min}\n")
    matrix = plan(ci_project(tmp_path, manifest))
    cell = matrix.cells[1]
    assert cell.tag == "cpp-train-train:cpu-latest"
    assert cell.cache_from == ("type=gha,scope=train-cpu",)
    assert cell.cache_to == ("type=gha,scope=train-cpu,mode=min",)


def test_a_registry_cache_needs_a_registry(tmp_path: Path) -> None:
    manifest = MATRIX.replace("  registry: ghcr.io/acme\n", "  cache: {registry: true}\n")
    error = _error(tmp_path, manifest)
    assert "needs `ci.registry`" in error.message and error.location is not None


def test_generated_names_do_not_depend_on_the_checkout_directory(tmp_path: Path) -> None:
    manifest = MATRIX.replace("ci:\n", "ci:\n  project: example\n")
    one = plan(ci_project(tmp_path / "a", manifest, name="checkout-one"))
    two = plan(ci_project(tmp_path / "b", manifest, name="other-name"))
    assert [c.spec for c in one.cells] == [c.spec for c in two.cells]
    labels = dict(one.cells[1].spec.labels)
    assert labels["org.opencontainers.image.title"] == "example-train"


def test_profiles_can_be_chosen(tmp_path: Path) -> None:
    manifest = MATRIX.replace("ci:\n", "ci:\n  profiles: [train]\n")
    matrix = plan(ci_project(tmp_path, manifest))
    assert [cell.id for cell in matrix.cells] == [
        "train-cpu",
        "train-cu130",
        "train-pascal-blackwell",
    ]


def _error(tmp_path: Path, manifest: str) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        plan(ci_project(tmp_path, manifest))
    return caught.value


@pytest.mark.parametrize(
    ("old", "new", "words", "line"),
    [
        ("[cpu, cu130,", "[cpu, cu128,", "no official cu128 build", 10),
        ("ci:\n", "ci:\n  tag: '{registry}/x:{variant}'\n", "has no {profile}", 9),
        ("ci:\n", "ci:\n  tag: '{registry}/{profile}:{variant}-{sha}'\n", "{sha}", 9),
        ("ci:\n", "ci:\n  profiles: [trian]\n", "did you mean 'train'", 9),
        ("ci:\n", "ci:\n  platforms: [linux/arm64]\n", "linux/arm64", 9),
        ("build:pascal-blackwell", "build:nope", "unknown build recipe 'nope'", 10),
        ('train: [--steps, "2"]', "trian: []", "not a profile of the matrix", 12),
        ("[cpu, cu130,", "[cpu, cpu, cu130,", "share the name 'cpu'", 10),
    ],
)
def test_errors_point_at_the_value(
    tmp_path: Path, old: str, new: str, words: str, line: int
) -> None:
    assert old in MATRIX
    error = _error(tmp_path, MATRIX.replace(old, new))
    assert words in str(error) + (error.hint or "")
    assert error.location is not None and error.location.line == line


def test_a_builder_profile_is_not_built_per_variant(tmp_path: Path) -> None:
    manifest = MATRIX.replace("images:\n", "images:\n  builder: {}\n").replace(
        "ci:\n", "ci:\n  profiles: [builder]\n"
    )
    assert "builder image" in str(_error(tmp_path, manifest))


def test_no_ci_section_says_how_to_add_one(tmp_path: Path) -> None:
    error = _error(tmp_path, MATRIX.split("ci:\n")[0])
    assert "no `ci:` section" in error.message
    assert error.hint is not None and "variants:" in error.hint


def test_variants_are_required_by_the_schema(tmp_path: Path) -> None:
    error = _error(tmp_path, MATRIX.split("ci:\n")[0] + "ci:\n  registry: ghcr.io/acme\n")
    assert "variants" in str(error)


def test_the_data_file_is_consistent() -> None:
    data = ci_data()
    assert all("@v" in action for action in data.actions.values())
    assert all(path.startswith("/") for path in data.hosted_cleanup)
    assert data.defaults["runner"] in data.hosted_runners
    assert set(data.defaults["tests"]) == {"dev", "train"}
    assert data.platforms["linux/amd64"] == "linux-x86_64"


def test_recipe_variants_follow_the_matrix_release(tmp_path: Path) -> None:
    """A recipe that pins no torch builds the matrix's release (ci.torch over
    libtorch.torch), like the official variants: one release per matrix."""
    manifest = MATRIX.replace("ci:\n", 'ci:\n  torch: "2.12.1"\n', 1)
    assert manifest != MATRIX
    matrix = plan(ci_project(tmp_path, manifest))
    assert {variant.torch for variant in matrix.variants} == {"2.12.1"}
    assert not [w for w in matrix.warnings if "mixes torch releases" in w]


def test_a_matrix_that_mixes_releases_says_so(tmp_path: Path) -> None:
    project = ci_project(tmp_path)
    (project / "recipes").mkdir()
    (project / "recipes" / "pascal-blackwell.yml").write_text(
        'description: pinned\narchs: "6.1;12.0"\ntorch: "2.10.0"\n'
    )
    matrix = plan(project)
    built = matrix.variants[-1]
    assert built.torch == "2.10.0"  # the project's recipe pins it: kept, but said
    [warning] = [w for w in matrix.warnings if "mixes torch releases" in w]
    assert "torch 2.10.0: build:pascal-blackwell" in warning
    assert "torch 2.13.0: cpu, cu130" in warning
    assert warning in matrix.to_json()["warnings"]


def test_a_pushed_variant_is_pulled_by_digest_not_built(tmp_path: Path) -> None:
    from tests.support.ci import PUSHED, PUSHED_MATRIX

    planned = plan(ci_project(tmp_path, PUSHED_MATRIX))
    cpu, cu130, pushed = planned.variants
    assert pushed.pushed == PUSHED and not pushed.source_build
    assert pushed.install == (
        "fdl",
        "libtorch",
        "pull",
        PUSHED,
        "--name",
        "builds/pascal-blackwell",
        "--no-activate",
    )
    assert pushed.cache_key is None
    assert pushed.context == "ci/dockerfiles"  # nothing from the runner's disk
    assert pushed.ref.archs == ("sm_61", "sm_120")  # what the recipe says, as before
    assert pushed.to_json()["pushed"] == PUSHED
    assert cpu.pushed is None and cu130.pushed is None and cu130.install[2] == "download"


@pytest.mark.parametrize(
    ("entry", "words", "line"),
    [
        (f"cu128: {'r.io/team/libtorch@sha256:' + 'ab' * 32}", "not a variant of the matrix", 14),
        ("cpu: r.io/team/libtorch:2.13.0-cpu", "pinned by digest", 14),
    ],
)
def test_a_pushed_entry_names_a_variant_and_a_digest(
    tmp_path: Path, entry: str, words: str, line: int
) -> None:
    error = _error(tmp_path, MATRIX + f"  pushed:\n    {entry}\n")  # line 14
    assert words in str(error) + (error.hint or "")
    assert error.location is not None and error.location.line == line


def test_a_matrix_refuses_the_hosts_rust(tmp_path: Path) -> None:
    """`toolchain: host` mounts the building machine's Rust; a CI runner has none: the
    matrix refuses it at its line, with the local form of the build as the fix."""
    manifest = MATRIX.replace(
        '    args: [--steps, "20"]\n',
        '    args: [--steps, "20"]\n    toolchain: host\n    build: cargo build --release\n'
        "    program: target/release/train\n",
    )
    error = _error(tmp_path, manifest)
    assert "images.train.toolchain" in error.message and "CI runner" in error.message
    assert error.location is not None and error.location.line == 8
    assert "fdl --set images.train.toolchain=host image build train" in (error.hint or "")
