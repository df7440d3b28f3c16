"""`fdl init --template cpp` end to end, as a user would run it: init, a CPU libtorch
installed by `fdl libtorch install --from-wheel --cpu` from PyPI's torch wheel, then
`fdl build`, `fdl test`, `fdl train` (the loss must go down) - natively, and in the
dev container (libtorch mounted, or baked into the image) through docker compose
with the real engine, plus the slim training image built and run.

Images start from the locally made base (`fdl-test/debian:bookworm`, no registry
pulls) through `--set images.<profile>.base=...`. The variant (about 460 MB) is
installed once and hard-linked into each project. Images are named per run and
removed afterwards, with the variant images fdl made unless they existed before.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cpu_view import artefact_missing, cpu_view_env, install_args
from tests.support.images import link_variant

pytestmark = pytest.mark.slow

RUN_ID = uuid.uuid4().hex[:8]
BASE_IMAGE = os.environ.get("FDL_TEST_BASE_IMAGE", "fdl-test/debian:bookworm")
# This machine is itself a container: make fdl wrap `docker:` commands as on a host.
HOST = {"FDL_IN_CONTAINER": "0"}
LOSS = re.compile(r"^step (\d+) loss ([0-9.eE+-]+)$", re.M)
BUILD_TIMEOUT = 900


def _losses(text: str) -> list[float]:
    return [float(value) for _, value in LOSS.findall(text)]


def _assert_trains(output: str, steps: int) -> None:
    losses = _losses(output)
    assert losses, output[-2000:]
    assert f"trained {steps} steps" in output
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.fixture(scope="session")
def installed_variant(tmp_path_factory: pytest.TempPathFactory, fdl_process_session) -> Path:
    """`fdl libtorch install --from-wheel --cpu --torch 2.13.0` (the CPU view of PyPI's
    wheel, through the tests' cache), once per session."""
    seed = tmp_path_factory.mktemp("libtorch-seed")
    (seed / "fdl.yml").write_text("description: holds the installed variant\n")
    result = fdl_process_session(install_args("2.13.0"), cwd=seed, timeout=1200, env=cpu_view_env())
    if result.exit_code == 5:
        artefact_missing(f"PyPI cannot be read: {result.stderr[-400:]}")
    assert result.exit_code == 0, result.output
    assert "active variant: precompiled/cpu" in result.output
    return seed / "libtorch" / "precompiled" / "cpu"


@pytest.fixture(scope="session")
def fdl_process_session():
    """Like the `fdl_process` fixture, usable from session fixtures."""
    from tests.conftest import run_fdl_process

    def invoke(args: list[str], cwd: Path, timeout: float = 120, env: dict | None = None):
        return run_fdl_process(args, cwd=cwd, env={**HOST, **(env or {})}, timeout=timeout)

    return invoke


def _new_project(root: Path, name: str, mode: str, variant: Path, fdl) -> Path:
    result = fdl(
        ["init", name, "--template", "cpp", "--mode", mode, "--torch", "2.13.0", "--yes"],
        cwd=root,
    )
    assert result.exit_code == 0, result.output
    project = root / name
    link_variant(variant, project)
    return project


def test_native_project_builds_tests_and_trains(
    tmp_path: Path, installed_variant: Path, fdl_process_session
) -> None:
    fdl = fdl_process_session
    project = _new_project(tmp_path, "native-model", "native", installed_variant, fdl)
    # `fdl test` first, in a fresh project: it configures and builds what it tests
    test = fdl(["test"], cwd=project, timeout=BUILD_TIMEOUT)
    assert test.exit_code == 0, test.output[-3000:]
    assert "100% tests passed" in test.stdout
    build = fdl(["build"], cwd=project, timeout=BUILD_TIMEOUT)
    assert build.exit_code == 0, build.output[-3000:]
    assert (project / "build" / "train").is_file()
    train = fdl(["train", "--", "--steps", "40", "--log-every", "5"], cwd=project)
    assert train.exit_code == 0, train.output[-3000:]
    _assert_trains(train.stdout, 40)
    assert len(_losses(train.stdout)) == 9  # step 1, every 5th, the last
    assert "training on cpu" in train.stdout  # a CPU variant: --device auto picks the CPU
    cuda = fdl(["train", "--", "--steps", "2", "--device", "cuda"], cwd=project)
    assert cuda.exit_code == 2 and "libtorch sees no GPU" in cuda.stderr, cuda.output[-2000:]
    short = fdl(["--env", "ci", "train"], cwd=project)  # the CI overlay's short run
    assert short.exit_code == 0, short.output[-3000:]
    _assert_trains(short.stdout, 30)


class _Images:
    """Images a test made, removed at the end. fdl names the variant's image by its
    content and points the stable tag at it: tags that are new, or that now point
    elsewhere, are ours (fdl points the stable tag again on its next build)."""

    def __init__(self) -> None:
        self.tags: list[str] = []
        self.before = self._variant_images()

    @staticmethod
    def _variant_images() -> dict[str, str]:
        proc = subprocess.run(
            ["docker", "images", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}", "fdl-libtorch"],
            capture_output=True,
            text=True,
            check=False,
        )
        return dict(line.split() for line in proc.stdout.splitlines() if line.strip())

    def remove(self) -> None:
        after = self._variant_images()
        made = [name for name, ident in after.items() if self.before.get(name) != ident]
        for name in [*self.tags, *made]:
            subprocess.run(["docker", "rmi", "-f", name], capture_output=True, check=False)


@pytest.fixture
def images() -> Iterator[_Images]:
    made = _Images()
    yield made
    made.remove()


def _down(project: Path) -> None:
    subprocess.run(
        ["docker-compose", "down", "--remove-orphans"],
        cwd=project,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["mounted", "baked"])
def test_container_project_builds_tests_and_trains_in_the_dev_container(
    tmp_path: Path, installed_variant: Path, fdl_process_session, images: _Images, mode: str
) -> None:
    fdl = fdl_process_session
    name = f"fdl-it-{RUN_ID}-{mode}"
    project = _new_project(tmp_path, name, mode, installed_variant, fdl)
    images.tags += [f"{name}-dev:latest", f"{name}-train:latest"]
    base = ["--set", f"images.dev.base={BASE_IMAGE}", "--set", f"images.train.base={BASE_IMAGE}"]
    try:
        build = fdl([*base, "build"], cwd=project, timeout=BUILD_TIMEOUT)
        assert build.exit_code == 0, build.output[-3000:]
        # fdl built the missing dev image itself (BuildKit), then compose ran the build.
        assert f"image {name}-dev:latest of service 'dev' is missing: building it" in build.stderr
        # ... as this user (FDL_UID/FDL_GID), so the build tree is ours.
        assert (project / "build" / "train").stat().st_uid == os.getuid()
        cache = (project / "build" / "CMakeCache.txt").read_text()
        assert "Torch_DIR:PATH=/opt/libtorch/share/cmake/Torch" in cache
        baked = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--entrypoint",
                "ls",
                f"{name}-dev:latest",
                "/opt/libtorch/lib/libtorch.so",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (baked.returncode == 0) == (mode == "baked"), baked.stderr
        test = fdl([*base, "test"], cwd=project, timeout=BUILD_TIMEOUT)
        assert test.exit_code == 0, test.output[-3000:]
        assert "100% tests passed" in test.stdout
        assert "is missing" not in test.stderr  # the image exists now
        train = fdl([*base, "train", "--", "--steps", "30", "--log-every", "5"], cwd=project)
        assert train.exit_code == 0, train.output[-3000:]
        _assert_trains(train.stdout, 30)
        if mode == "mounted":  # the training image does not depend on the dev mode
            _train_image(project, name, base, fdl)
    finally:
        _down(project)


def _train_image(project: Path, name: str, base: list[str], fdl) -> None:
    built = fdl([*base, "image", "build", "train"], cwd=project, timeout=BUILD_TIMEOUT)
    assert built.exit_code == 0, built.output[-3000:]
    assert f"{name}-train:latest" in built.stdout
    run = fdl(
        [*base, "image", "run", "train", "--", "--steps", "20", "--out", "/workspace/runs"],
        cwd=project,
        timeout=300,
    )
    assert run.exit_code == 0, run.output[-3000:]
    _assert_trains(run.stdout, 20)
    assert (project / "runs" / "model.pt").is_file()
    assert len((project / "runs" / "loss.txt").read_text().split()) == 20
    _bench_host_and_image(project, base, fdl)


def _bench_host_and_image(project: Path, base: list[str], fdl) -> None:
    """The template's training program benchmarked on the host (the dev container's
    build, with the project's CPU variant) and in its training image, side by side."""
    import json

    with (project / "fdl.yml").open("a") as manifest:
        manifest.write(
            "\nbench:\n"
            "  steps:\n"
            "    compare:\n"
            "      host: {run: [build/train, --steps, '10', --out, runs-host],"
            " libtorch: precompiled/cpu}\n"
            "      image: {image: train, args: [--steps, '10', --out, /workspace/runs]}\n"
            "    rounds: 2\n"
            "    warmup: 0\n"
            "    figures: {loss: 'loss ([0-9.eE+-]+)'}\n"
        )
    ran = fdl([*base, "bench", "run", "--output", "bench.jsonl"], cwd=project, timeout=600)
    assert ran.exit_code == 0, ran.output[-3000:]
    records = [json.loads(line) for line in (project / "bench.jsonl").read_text().splitlines()]
    header, rounds = records[0], records[1:]
    image = header["images"]["train"]
    assert image["id"].startswith("sha256:") and image["variant"] == "precompiled/cpu"
    assert [r["side"] for r in rounds] == ["host", "image", "image", "host"]  # rotated
    assert all(r["figures"]["loss"] > 0 for r in rounds)
    table = fdl(["bench", "report", "bench.jsonl"], cwd=project)
    assert table.exit_code == 0, table.output
    assert "| steps | host | loss |" in table.stdout and "| steps | image | loss |" in table.stdout
