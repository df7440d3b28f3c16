"""Journey: the C++ user of the quick start (scripts/quickstart.sh: `fdl init my-model
--template cpp --mode native --torch 2.13.0 --yes`) whose repository is cloned under
another name (`p3`), as a teammate or a CI checkout would (issue 34: "C++ user from the
quick start copied under another name").

In the clone: `fdl setup --dry-run`, the build plan (`fdl build --dry-run`), the
training's dry run and `fdl ci check`, reading what the user reads; the images, the CI
matrix and the generated files keep the recorded name `my-model`, never `p3`. The real
build and training of the same project on the CPU libtorch is test_init_cpp.py's (a
clone here compiled the same program again: 6.8 min measured on the shared 2 cores, for
nothing the name changes).

Cost: ~3 s.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.images import make_variant

NAME = "my-model"
QUICKSTART = ["init", NAME, "--template", "cpp", "--mode", "native", "--torch", "2.13.0", "--yes"]


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _cloned(root: Path, init) -> Path:
    """The quick start's project, committed and cloned as `p3` (what git keeps only)."""
    made = init(QUICKSTART, cwd=root)
    assert made.exit_code == 0, made.output
    assert f"{NAME}: 19 created (template cpp, mode native, torch 2.13.0)" in made.stdout
    _git("init", "-q", cwd=root / NAME)
    _git("add", "-A", cwd=root / NAME)
    _git("commit", "-qm", "fdl init", cwd=root / NAME)
    _git("clone", "-q", NAME, "p3", cwd=root)
    clone = root / "p3"
    assert not (clone / "libtorch").exists() and (clone / ".fdl-answers.yml").is_file()
    return clone


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (scripts/setup-machine.sh)")
def test_the_quick_start_cloned_under_another_name(tmp_path: Path, run_fdl) -> None:
    clone = _cloned(tmp_path, run_fdl)

    setup = run_fdl(["setup", "--dry-run"], cwd=clone)
    assert setup.exit_code == 0, setup.output
    assert f"libtorch root: project ({clone})" in setup.stdout
    assert "torch 2.13.0: libtorch.torch (fdl.yml:" in setup.stdout
    assert "[dry-run] nothing changed" in setup.output

    # Before a libtorch is installed the build plan says so, with the commands that do it.
    build = run_fdl(["build", "--dry-run"], cwd=clone)
    assert build.exit_code == 0, build.output
    assert "note: no active libtorch variant" in build.stdout
    assert "fdl libtorch install --from-wheel" in build.stdout

    make_variant(clone)  # what `fdl libtorch install --from-wheel --cpu` leaves (layout)
    build = run_fdl(["build", "--dry-run"], cwd=clone)
    variant = clone / "libtorch" / "precompiled" / "cpu"
    assert f"export LIBTORCH={variant}" in build.stdout, build.stdout
    assert "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release" in build.stdout
    train = run_fdl(["train", "--dry-run", "--", "--steps", "5"], cwd=clone)
    assert train.exit_code == 0, train.output
    assert "build/train" in train.stdout and "--steps 5" in train.stdout

    # The CI files init generated still match: the clone is the same project.
    check = run_fdl(["ci", "check"], cwd=clone)
    assert check.exit_code == 0, check.output
    assert "the 5 generated files match fdl.yml" in check.stderr
    matrix = run_fdl(["ci", "matrix"], cwd=clone)
    assert f"{NAME}-train:cpu-latest" in matrix.stdout and "p3-" not in matrix.stdout
    rendered = run_fdl(["image", "render", "train"], cwd=clone)
    assert f'org.opencontainers.image.title="{NAME}-train"' in rendered.stdout
    assert "p3" not in rendered.stdout
