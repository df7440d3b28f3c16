"""The Docker backend end to end: builder image, cache mounts, copy-out, verification.

The base image is made here FROM the local Debian image with the toolchain from apt (no
registry pulls). There is no CUDA in it, so the build is CPU-only (USE_CUDA=0); the CUDA
path of the Dockerfile (nvcc/gcc/cuDNN preflight) is covered by the plan tests.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import pytest

from tests.support.build_helpers import build_and_run_consumer, copy_source, losses

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TOOLCHAIN_IMAGE = "fdl-test/libtorch-toolchain:bookworm"
TOOLCHAIN = """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends \\
      g++ cmake make ninja-build python3 python3-venv ccache git ca-certificates \\
    && rm -rf /var/lib/apt/lists/*
"""


@pytest.fixture(scope="module")
def toolchain_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    from fdl.engine import BuildSpec, default_engine
    from tests.conftest import BASE_IMAGE

    engine = default_engine()
    if not engine.image_exists(TOOLCHAIN_IMAGE):
        context = tmp_path_factory.mktemp("toolchain")
        engine.build(
            BuildSpec(
                context,
                dockerfile_text=TOOLCHAIN.format(base=BASE_IMAGE),
                tags=(TOOLCHAIN_IMAGE,),
            )
        )
    return TOOLCHAIN_IMAGE


def test_docker_cpu_build_is_copied_out_registered_and_usable(
    run_fdl, tmp_path: Path, toolchain_image: str
) -> None:
    source = copy_source(tmp_path / "pytorch")
    # A source tree no earlier run had: BuildKit's cache on this engine (kept between test
    # runs) cannot answer the first build, so it really compiles and the second is cached.
    (source / "fdl-test-nonce.txt").write_text(uuid.uuid4().hex + "\n")
    # The user's directory holds much more than a build needs: none of it may be sent.
    decoy = tmp_path / "datasets.bin"
    decoy.write_bytes(os.urandom(DECOY_BYTES))
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
    args = [
        "libtorch",
        "build",
        "--docker",
        "--cpu",
        "--source",
        str(source),
        "--disk-gb",
        "1",
        "--base-image",
        toolchain_image,
        "--name",
        "docker-cpu",
    ]
    planned = run_fdl([*args, "--dry-run", "--json"], cwd=tmp_path, env=env)
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["docker"]["base_image"] == toolchain_image
    assert "--mount=type=cache" in plan["docker"]["dockerfile"]
    result = run_fdl([*args, "--json"], cwd=tmp_path, env=env)
    assert result.exit_code == 0, result.output
    built = json.loads(result.stdout)
    variant = Path(built["path"])
    assert built["variant"] == "builds/docker-cpu" and built["activated"]
    assert (variant / "lib" / "libtorch.so").is_file()
    assert not (variant / ".fdl-build-facts").exists()
    info = built["info"]
    assert info["source"]["backend"] == "docker" and info["source"]["image"] == toolchain_image
    assert info["extra"]["toolchain"]["gcc"].startswith("12.")
    assert info["extra"]["compiler_cache"]["misses"] is not None
    log = Path(plan["paths"]["log"]).read_text(errors="replace")
    # only the build context fdl made was sent: the working directory's 32 MB decoy was not
    sent = _context_bytes(log)
    assert sent, f"no build context transfer in the log: {log[-2000:]}"
    assert max(sent) < DECOY_BYTES // 4, sent
    # The preflight ran now, or in an earlier run on this engine (then its step is cached).
    assert "fdl-preflight: ok" in log or _preflight_cached(log), log[-2000:]
    output = build_and_run_consumer(variant, tmp_path)
    assert losses(output)
    # a second run reuses the cached image steps: its own part of the log (the runner appends
    # to one log file) shows the compile step CACHED and no compiler at work
    first_run = len(Path(plan["paths"]["log"]).read_bytes())
    again = run_fdl([*args, "--json"], cwd=tmp_path, env=env)
    assert again.exit_code == 0, again.output
    second = Path(plan["paths"]["log"]).read_bytes()[first_run:].decode(errors="replace")
    compile_step = _step_of(second, "build.sh")
    assert compile_step is not None, second[-3000:]
    assert f"{compile_step} CACHED" in second, second[-3000:]
    assert "Building CXX object" not in second and "Building CUDA object" not in second


DECOY_BYTES = 32 << 20
_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def _context_bytes(log: str) -> list[float]:
    """Sizes of every build context BuildKit received (``transferring context: 2.35kB``)."""
    found = re.findall(r"transferring context: ([0-9.]+)([kKMG]?B)", log)
    return [float(number) * _UNITS[unit] for number, unit in found]


def _step_of(log: str, marker: str) -> str | None:
    """The ``#N`` id of the BuildKit step whose command mentions ``marker``."""
    for line in log.splitlines():
        if line.startswith("#") and marker in line and "[" in line:
            return line.split()[0]
    return None


def _preflight_cached(log: str) -> bool:
    """Whether BuildKit's plain log shows the preflight step as cached."""
    steps = [
        line.split()[0]
        for line in log.splitlines()
        if "preflight.sh" in line and line.startswith("#")
    ]
    return any(f"{step} CACHED" in log for step in steps)


SIX_URL = "https://files.pythonhosted.org/packages/source/s/six/six-1.11.0.tar.gz"

# Prepended to the copied tree's build script: a compile step that has a network fails.
NO_NETWORK_CHECK = """import os, sys
_interfaces = sorted(os.listdir("/sys/class/net"))
if _interfaces != ["lo"] and os.environ.get("FDL_TEST_NEEDS_NO_NETWORK"):
    sys.exit(f"fdl-test: the compile step has network interfaces {_interfaces}")
print(f"fdl-test: network interfaces {_interfaces}", flush=True)
"""


def test_offline_compiles_without_network(run_fdl, tmp_path: Path, toolchain_image: str) -> None:
    """--offline: the compile step runs with --network=none (BuildKit). The same tree
    built without it sees the network (the check is real), with it only loopback."""
    source = copy_source(tmp_path / "pytorch")
    (source / "fdl-test-nonce.txt").write_text(uuid.uuid4().hex + "\n")
    script = source / "tools" / "build_libtorch.py"
    text = script.read_text()
    head, _, rest = text.partition("from __future__ import annotations\n")
    script.write_text(head + "from __future__ import annotations\n" + NO_NETWORK_CHECK + rest)
    # NNPACK's configure downloads six from PyPI (the fake does it when given a URL): the
    # offline compile gets through only because the plan turns USE_NNPACK off.
    (source / "cmake" / "External" / "nnpack-six-url.txt").write_text(SIX_URL + "\n")
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
    args = ["libtorch", "build", "--docker", "--cpu", "--source", str(source), "--disk-gb", "1",
            "--base-image", toolchain_image, "--name", "offline", "--no-activate",
            "--jobs", "2"]  # fmt: skip
    planned = run_fdl([*args, "--offline", "--dry-run", "--json"], cwd=tmp_path, env=env)
    assert planned.exit_code == 0, planned.output
    dockerfile = json.loads(planned.stdout)["docker"]["dockerfile"]
    assert "FROM fetch AS compile" in dockerfile
    assert "FDL_OFFLINE=1 sh /opt/fdl/build.sh" in dockerfile
    offline = run_fdl([*args, "--offline", "--json"], cwd=tmp_path, env=env)
    assert offline.exit_code == 0, offline.output[-3000:]
    log = Path(json.loads(planned.stdout)["paths"]["log"]).read_text(errors="replace")
    assert "fdl-test: network interfaces ['lo']" in log, log[-3000:]
    assert "USE_NNPACK          : 0" in log and "Downloading six" not in log, log[-3000:]
    # the check itself: without --offline the compile step has the build network
    script.write_text(script.read_text().replace("FDL_TEST_NEEDS_NO_NETWORK", "PATH"))
    online = run_fdl([*args, "--fresh", "--json"], cwd=tmp_path, env=env)
    assert online.exit_code != 0
    assert "the compile step has network interfaces" in online.output


def test_fetch_only_runs_the_fetch_stage_and_compiles_nothing(
    run_fdl, tmp_path: Path, toolchain_image: str
) -> None:
    source = copy_source(tmp_path / "pytorch")
    (source / "fdl-test-nonce.txt").write_text(uuid.uuid4().hex + "\n")
    env = {"FDL_HOME": str(tmp_path / "home"), "FDL_CACHE_DIR": str(tmp_path / "cache")}
    args = ["libtorch", "build", "--docker", "--cpu", "--source", str(source), "--disk-gb", "1",
            "--base-image", toolchain_image, "--name", "fetched", "--fetch-only"]  # fmt: skip
    done = run_fdl([*args, "--json"], cwd=tmp_path, env=env)
    assert done.exit_code == 0, done.output[-3000:]
    report = json.loads(done.stdout)
    assert report["backend"] == "docker" and report["fetched"].endswith("-fetch")
    log = Path(report["log"]).read_text(errors="replace")
    assert "Building CXX object" not in log and "build_libtorch.py" not in log
    assert not (tmp_path / "home" / "libtorch" / "builds" / "fetched").exists()
