"""The tch template for real: `fdl init demo --template tch --mode native`, `fdl setup`,
then `fdl build`, `fdl test` and `fdl train -- --epochs 3` on tch 0.26.0.

`fdl setup --dry-run` in the made project plans the libtorch torch-sys 0.26.0 checks for
(torch 2.13.0, its CPU build: the project pins `variant: cpu` where init saw no GPU);
`fdl setup --yes` installs it (here download.pytorch.org may be out of reach: setup
then reads the CPU view of PyPI's torch 2.13.0 wheel). torch-sys compiles against it
and accepts its version with no `LIBTORCH_BYPASS_VERSION_CHECK` anywhere; the small MLP
trains, the loss of the last epoch below the first's, and its test passes.

Cost: one build for the module, cached like the floDl one (``tests/support/cargo.py``,
key ``tch-template-0.26.0-torch-2.13.0``: cargo's registry, target directory and the
project's path under ``$FDL_TEST_CACHE/cargo``, the Cargo.lock of the first green run).
Measured on 2 cores shared with other builds: cold, `fdl build` took 317 s wall (load
6-9; torch-sys's C++ wrapper at -O0 dominates), then the module 830 s at load 11-14:
`fdl setup` 82 s (download.pytorch.org unreachable, retried, then the CPU view), the
warm `fdl build` 4 s, `fdl train` 703 s wall / 171 s CPU (the release build: torch-sys's
wrapper again, at -O0 as the template's Cargo.toml asks, and tch optimised; then 3
epochs). ``pytest -s`` prints each step's wall and CPU seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdl.compat import framework_release
from fdl.scaffold import template
from tests.conftest import Result, run_fdl_process
from tests.support.cargo import CargoProject, cargo_project, skip_if_unreachable
from tests.support.cpu_view import artefact_missing, cpu_view_env

pytestmark = pytest.mark.slow

_NAME, TCH = template("tch").framework or ("tch", "")
TORCH = framework_release(_NAME, TCH).torch  # 2.13.0 (fdl/data/compat/frameworks.yaml)
KEY = f"tch-template-{TCH}-torch-{TORCH}"
BUILD_TIMEOUT = 2400  # torch-sys's C++ on two busy cores
EPOCH = re.compile(r"^epoch (\d+)/(\d+) loss=([0-9.eE+-]+)$", re.M)


@dataclass
class Demo:
    cache: CargoProject
    path: Path
    home: Path

    def fdl(self, *args: str, timeout: float = 600) -> Result:
        return self.cache.fdl(list(args), self.path, env=cpu_view_env(self.home), timeout=timeout)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    with pytest.MonkeyPatch.context() as patch, cargo_project(KEY) as cache:
        patch.delenv("LIBTORCH_BYPASS_VERSION_CHECK", raising=False)  # torch-sys checks
        home = tmp_path_factory.mktemp("fdl-home")
        made = Demo(cache, cache.directory / "demo", home)
        init = run_fdl_process(
            ["init", "demo", "--template", "tch", "--mode", "native", "--yes", "--gpus", "none"],
            cwd=cache.directory,
            env={"FDL_HOME": str(home)},
        )
        assert init.exit_code == 0, init.output
        assert f'tch = "={TCH}"' in (made.path / "Cargo.toml").read_text()
        plan = made.fdl("setup", "--dry-run")
        assert plan.exit_code == 0, plan.output
        assert f"torch {TORCH}: libtorch.torch (fdl.yml:" in plan.stdout
        assert f"--cpu --torch {TORCH}" in plan.stdout
        with cache.timed("fdl setup"):
            installed = made.fdl("setup", "--yes", timeout=1200)
        if installed.exit_code == 5:
            artefact_missing(f"no libtorch {TORCH} can be read: {installed.stderr[-400:]}")
        assert installed.exit_code == 0, installed.output
        assert f"libtorch {TORCH}" in installed.output
        assert "active variant: precompiled/cpu" in installed.output
        cache.restore_lock(made.path)
        with cache.timed("fdl build"):
            build = made.fdl("build", timeout=BUILD_TIMEOUT)
        if build.exit_code != 0:
            skip_if_unreachable(build.output)
        assert build.exit_code == 0, build.output[-4000:]
        cache.keep_lock(made.path)
        yield made
        print(f"\n[{KEY}] " + "; ".join(f"{k}: {v}" for k, v in cache.timings.items()))


def test_the_tch_template_builds_tests_and_trains(demo: Demo) -> None:
    assert (Path(demo.cache.env["CARGO_TARGET_DIR"]) / "debug" / "demo").is_file()
    test = demo.fdl("test", timeout=BUILD_TIMEOUT)
    assert test.exit_code == 0, test.output[-4000:]
    assert "test tests::training_lowers_the_loss ... ok" in test.stdout, test.stdout[-2000:]
    with demo.cache.timed("fdl train (release build and 3 epochs)"):
        train = demo.fdl("train", "--", "--epochs", "3", timeout=BUILD_TIMEOUT)
    assert train.exit_code == 0, train.output[-4000:]
    assert "training on Cpu" in train.stdout
    epochs = [(int(n), int(total), float(loss)) for n, total, loss in EPOCH.findall(train.stdout)]
    assert [(n, total) for n, total, _ in epochs] == [(1, 3), (2, 3), (3, 3)], train.stdout
    assert epochs[-1][2] < epochs[0][2], epochs
    assert "trained 3 epochs: loss" in train.stdout
    assert "BYPASS" not in train.output


def test_a_bad_argument_is_refused_by_the_program(demo: Demo) -> None:
    ran = demo.fdl("train", "--", "--epochs", "0", timeout=BUILD_TIMEOUT)
    assert ran.exit_code == 2, ran.output[-2000:]
    assert "error: --epochs must be at least 1" in ran.stderr
