"""A floDl program compiled, tested and trained through fdl, as a floDl user does it.

In a fresh project: `fdl init demo --template flodl --mode native`, the set-up line the
project's README gives (the CPU libtorch of torch 2.10.0 from PyPI's wheel), then
`fdl build`, `fdl test` and `fdl train -- --epochs 3`: the template's floDl (0.8.0) and
flodl-sys from crates.io compile against the libtorch fdl installed and the loss of the
last epoch is below the first's. Then the HuggingFace playground (`fdl add flodl-hf`, the
same files as `fdl init --with-hf`) builds against the same libtorch, `fdl diagnose --json` says
everything fits, and `fdl build` with another torch release active is stopped by fdl.

Cost: cargo's registry, target directory and the project's path are cached under
``$FDL_TEST_CACHE/cargo`` (``tests/support/cargo.py``, key ``flodl-<release>-torch-2.10.0``,
about 0.7 GB of target), the CPU view's byte ranges under ``$FDL_TEST_CACHE/fdl`` (127 MiB).
With floDl 0.8.0, cold, at load 11-14 (three other builds beside it): set-up 28 s, the
debug build 954 s wall (179 s CPU), `fdl train` 366 s (107 s CPU; the release build, then
3 epochs), a rebuild after an edit 2 s, the flodl-hf playground 1082 s (549 s CPU); 41 min
for the module. Measured with floDl 0.5.3 on 2 cores shared with other builds (load
10-14): cold, the debug build took 17 min wall, the release build 6 min, the flodl-hf playground 14 min (325 s CPU; the
integrator's idle machine: 62 s for the debug build; at load 4-8, with the crates already
downloaded, 108 s wall and 109 s CPU). Warm, only the project's own crates
compile (load 3): set-up 5 s, `fdl build` 1 s, `fdl train` 7 s (the release build of the
crate, then 3 epochs), the playground 30 s, 1 min for the module; under load 12 it was
17 s, 3 s and 73 s. ``pytest -s`` prints each step's wall and CPU seconds.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdl.compat import framework_release
from fdl.scaffold import template
from tests.conftest import Result, run_fdl_process
from tests.support.cargo import CargoProject, cargo_project, skip_if_unreachable
from tests.support.cpu_view import artefact_missing, cpu_view_env, install_cpu_view
from tests.support.images import link_variant

pytestmark = pytest.mark.slow

_NAME, FLODL = template("flodl").framework or ("flodl", "")  # the release the template writes
TORCH = framework_release(_NAME, FLODL).torch  # 2.10.0 (fdl/data/compat/frameworks.yaml)
KEY = f"flodl-{FLODL}-torch-{TORCH}"
BUILD_TIMEOUT = 2400  # a cold build took 17 min on 2 cores shared with other builds
EPOCH = re.compile(r"^\s*epoch\s+(\d+)/(\d+)\s+loss=([0-9.eE+-]+)", re.M)


@dataclass
class Demo:
    """The project of the module, built once."""

    cache: CargoProject
    path: Path
    home: Path
    cold: bool

    def fdl(self, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> Result:
        environ = {**cpu_view_env(self.home), **(env or {})}
        return self.cache.fdl(list(args), self.path, env=environ, timeout=timeout)


def _readme_setup(project: Path) -> list[str]:
    """The first command of the README's "First steps" that is not `cd`: the set-up."""
    text = (project / "README.md").read_text()
    block = text.split("## First steps", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    for line in block.splitlines():
        command = shlex.split(line.split("#", 1)[0])
        if command and command[0] == "fdl" and command[1] not in ("build", "test", "train"):
            return command[1:]
    raise AssertionError(f"no set-up command in the README's first steps:\n{block}")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    with cargo_project(KEY) as cache:
        cold = not Path(cache.env["CARGO_TARGET_DIR"]).is_dir()
        home = tmp_path_factory.mktemp("fdl-home")
        made = Demo(cache, cache.directory / "demo", home, cold)
        init = run_fdl_process(
            ["init", "demo", "--template", "flodl", "--mode", "native", "--yes"],
            cwd=cache.directory,
            env={"FDL_HOME": str(home)},
        )
        assert init.exit_code == 0, init.output
        assert f'flodl = "{FLODL}"' in (made.path / "Cargo.toml").read_text()
        setup = _readme_setup(made.path)
        assert setup[:3] == ["libtorch", "install", "--from-wheel"], setup
        with cache.timed("set-up"):
            installed = made.fdl(*setup, timeout=1200)
        if installed.exit_code == 5:
            artefact_missing(f"PyPI cannot be read: {installed.stderr[-400:]}")
        assert installed.exit_code == 0, installed.output
        assert "active variant: precompiled/cpu" in installed.output
        assert f"libtorch {TORCH}" in installed.output
        cache.restore_lock(made.path)
        with cache.timed("fdl build (cold)" if cold else "fdl build (warm cache)"):
            build = made.fdl("build", timeout=BUILD_TIMEOUT)
        if build.exit_code != 0:
            skip_if_unreachable(build.output)
        assert build.exit_code == 0, build.output[-4000:]
        cache.keep_lock(made.path)
        yield made
        print(f"\n[{KEY}] " + "; ".join(f"{k}: {v}" for k, v in cache.timings.items()))


def test_the_template_builds_tests_and_trains(demo: Demo) -> None:
    assert (Path(demo.cache.env["CARGO_TARGET_DIR"]) / "debug" / "demo").is_file()
    test = demo.fdl("test", timeout=BUILD_TIMEOUT)
    assert test.exit_code == 0, test.output[-4000:]
    assert "test result: ok" in test.stdout
    with demo.cache.timed("fdl train (release build and 3 epochs)"):
        train = demo.fdl("train", "--", "--epochs", "3", timeout=BUILD_TIMEOUT)
    assert train.exit_code == 0, train.output[-4000:]
    epochs = [(int(n), int(total), float(loss)) for n, total, loss in EPOCH.findall(train.output)]
    assert [(n, total) for n, total, _ in epochs] == [(1, 3), (2, 3), (3, 3)], train.output[-3000:]
    losses = [loss for *_, loss in epochs]
    assert losses[-1] < losses[0], losses
    assert "trained 3 epochs" in train.stdout
    # a rebuild after an edit compiles the project's crate only
    main = demo.path / "src" / "main.rs"
    main.write_text(main.read_text() + "\n// edited\n")
    with demo.cache.timed("fdl build (after an edit)"):
        rebuilt = demo.fdl("build", timeout=BUILD_TIMEOUT)
    assert rebuilt.exit_code == 0, rebuilt.output[-4000:]
    compiled = re.findall(r"Compiling (\S+) v", rebuilt.stderr)
    assert compiled == ["demo"], rebuilt.stderr[-3000:]


def test_the_hf_playground_compiles_against_the_same_libtorch(demo: Demo) -> None:
    """`fdl add flodl-hf` in the project, and the same playground from `fdl init --with-hf`:
    it compiles (the Hub loader and the tokenizer too) and runs until it needs the Hub."""
    added = demo.fdl("add", "flodl-hf")
    assert added.exit_code == 0, added.output
    playground = demo.path / "flodl-hf"
    assert f'flodl-hf = "={FLODL}"' in (playground / "Cargo.toml").read_text()
    fresh = demo.cache.directory / "with-hf"
    fresh.mkdir()
    init = run_fdl_process(
        ["init", "demo", "--template", "flodl", "--mode", "native", "--with-hf", "--yes"],
        cwd=fresh,
        env={"FDL_HOME": str(demo.home)},
    )
    assert init.exit_code == 0, init.output
    made = sorted(p.relative_to(playground) for p in playground.rglob("*") if p.is_file())
    assert made == sorted(
        p.relative_to(fresh / "demo" / "flodl-hf")
        for p in (fresh / "demo" / "flodl-hf").rglob("*")
        if p.is_file()
    )
    for relative in made:  # the one built below stands for both
        assert (playground / relative).read_bytes() == (
            fresh / "demo" / "flodl-hf" / relative
        ).read_bytes(), relative
    demo.cache.restore_lock(demo.path, "flodl-hf")
    with demo.cache.timed("fdl flodl-hf build (release)"):
        build = demo.fdl("flodl-hf", "build", timeout=BUILD_TIMEOUT)
    if build.exit_code != 0:
        skip_if_unreachable(build.output)
    assert build.exit_code == 0, build.output[-4000:]
    demo.cache.keep_lock(demo.path, "flodl-hf")
    # without the Hub (a closed port as its endpoint, an empty cache), it starts, loads
    # libtorch and stops where the model would be downloaded, with an error, not a crash
    offline = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(demo.home / "hf")}
    ran = demo.fdl("flodl-hf", "classify", timeout=BUILD_TIMEOUT, env=offline)
    assert "loading cardiffnlp/" in ran.stderr, ran.output[-3000:]
    assert ran.exit_code == 1, ran.output[-3000:]
    assert "panicked" not in ran.output and "error while loading shared" not in ran.output


def test_diagnose_says_the_project_fits(demo: Demo) -> None:
    result = demo.fdl("diagnose", "--no-docker", "--json")
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout)["checks"]
    errors = [c for c in checks if c["severity"] == "error"]
    assert not errors, errors
    framework = {c["name"]: c for c in checks if c["group"] == "framework"}
    assert f"floDl {FLODL}" in json.dumps(framework) and f"torch {TORCH}" in json.dumps(framework)
    assert "active" not in framework and "pin" not in framework  # the active one is 2.10.0
    toolchain = {c["name"]: c["severity"] for c in checks if c["group"] == "toolchain"}
    assert toolchain["cargo"] == "ok" and toolchain["rustc"] == "ok"
    assert all(c["severity"] in ("ok", "info") for c in checks if c["group"] == "libtorch")


def test_build_with_another_release_active_is_stopped_before_cargo(
    demo: Demo, tmp_path: Path
) -> None:
    """torch 2.13.0 active (the CPU view of its wheel): `fdl build` stops before cargo."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "fdl.yml").write_text("description: holds torch 2.13.0\n")
    other = install_cpu_view(seed, home=demo.home, torch="2.13.0")
    link_variant(other, demo.path, "precompiled/cpu-2.13.0")
    fakes = tmp_path / "bin"
    fakes.mkdir()
    record = tmp_path / "cargo-ran"
    (fakes / "cargo").write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    (fakes / "cargo").chmod(0o755)
    path = f"{fakes}:{demo.cache.env['PATH']}"
    try:
        result = demo.fdl("build", env={"PATH": path})
        assert result.exit_code == 4, result.output
        assert "the active libtorch precompiled/cpu-2.13.0 is torch 2.13.0" in result.stderr
        assert f"floDl {FLODL}" in result.stderr
        assert "fix: fdl libtorch activate precompiled/cpu " in result.stderr
        assert "libtorch.framework-check=false" in result.stderr
        assert not record.exists()
        diagnosed = json.loads(demo.fdl("diagnose", "--no-docker", "--json").stdout)
        active = [
            c for c in diagnosed["checks"] if (c["group"], c["name"]) == ("framework", "active")
        ]
        assert active and active[0]["severity"] == "error", diagnosed["checks"]
    finally:
        (demo.path / "libtorch" / ".active").write_text("precompiled/cpu\n")
        shutil.rmtree(demo.path / "libtorch" / "precompiled" / "cpu-2.13.0")
    result = demo.fdl("build", env={"PATH": path})
    assert result.exit_code == 0 and record.read_text() == "build\n", result.output
