"""sccache-dist in a build: the manifest's ``cache: {kind, dist}``, the plan, the private
client config, the scheduler check before the build and the distributed-compile count.

The sccache server is a FakeRunner here; tests/integration/test_build_sccache_dist.py runs
the real scheduler and build server.
"""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from fdl.errors import ManifestError, ManifestErrors, UsageError
from fdl.libtorch.build import MachineFacts, Setting, build_request, plan_build
from fdl.libtorch.build._cache import _sccache_stats, cache_stats, start_cache
from fdl.libtorch.build._dist import DistPlan, DistSettings, client_config, dist_status
from fdl.manifest import load_manifest
from fdl.runner import Completed
from tests.support.fakes import FakeRunner

TOKEN = "s3cr3t-farm-token"
FARM = """libtorch:
  build:
    cache:
      kind: sccache
      dist:
        scheduler: http://10.0.0.5:10600
        auth: {token_env: FARM_TOKEN}
"""
CONNECTED = (
    '{"SchedulerStatus":["http://10.0.0.5:10600/",{"num_servers":3,"num_cpus":96,"in_progress":0}]}'
)
DOWN = '{"NotConnected":["http://10.0.0.5:10600/","enabled, not connected, will retry in 30.0s"]}'
NO_SERVER = (
    '{"SchedulerStatus":["http://10.0.0.5:10600/",{"num_servers":0,"num_cpus":0,"in_progress":0}]}'
)
# sccache 0.16.0 --show-stats --stats-format json after 17 compiles, 16 on the farm
STATS = {
    "stats": {
        "compile_requests": 17,
        "cache_hits": {"counts": {}},
        "cache_misses": {"counts": {"C/C++": 17}},
        "compilations": 17,
        "dist_compiles": {"127.0.0.1:10501": 16},
        "dist_errors": 0,
    }
}


def _facts(tmp_path: Path, **environ: str) -> MachineFacts:
    return MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=None,
        nvcc_reason="no nvcc",
        tools={
            "gcc": "12.2.0",
            "g++": "12.2.0",
            "cmake": "3.28.3",
            "python3": "3.11.2",
            "git": "2.39.5",
        },
        tool_paths={"python3": "/usr/bin/python3", "sccache": "/opt/bin/sccache"},
        docker="buildkit",
        docker_reason=None,
        cores=8,
        ram_gb=64.0,
        disk_free_gb=200.0,
        environ=environ,
    )


def _request(tmp_path: Path, text: str = FARM, **options: tuple[object, str]):
    (tmp_path / "fdl.yml").write_text(text)
    return build_request(load_manifest(tmp_path), options, tmp_path)


def _plan(tmp_path: Path, **options: tuple[object, str]):
    request = _request(tmp_path, cpu=(True, "--cpu"), backend=("native", "--native"), **options)
    return plan_build(request, _facts(tmp_path, FARM_TOKEN=TOKEN))


# --- the manifest --------------------------------------------------------------------------


def test_the_mapping_gives_the_kind_and_the_farm_at_its_line(tmp_path: Path) -> None:
    request = _request(tmp_path)
    assert request.value("cache") == "sccache"
    assert request.cache_dist is not None
    assert request.cache_dist.value == DistSettings(
        "http://10.0.0.5:10600", "FARM_TOKEN", None, request.cache_dist.origin
    )
    assert request.cache_dist.location is not None and request.cache_dist.location.line == 6


def test_the_string_form_still_works(tmp_path: Path) -> None:
    request = _request(tmp_path, "libtorch:\n  build:\n    cache: sccache\n")
    assert request.value("cache") == "sccache" and request.cache_dist is None


def test_a_token_file_is_relative_to_the_manifest(tmp_path: Path) -> None:
    text = FARM.replace("{token_env: FARM_TOKEN}", "{token_file: secrets/farm.token}")
    request = _request(tmp_path, text)
    assert request.cache_dist is not None
    assert request.cache_dist.value.token_file == tmp_path / "secrets" / "farm.token"


BAD = [
    ("http://10.0.0.5:10600", "10.0.0.5:10600", "cache.dist.scheduler", 6),
    ("{token_env: FARM_TOKEN}", "{token_env: FARM_TOKEN, token_file: x}", "exactly one", 7),
    ("{token_env: FARM_TOKEN}", "{}", "found neither", 7),
    ("{token_env: FARM_TOKEN}", "{token: abc}", "unknown key 'token'", 7),
    ("{token_env: FARM_TOKEN}", "{token_env: 1FARM}", "token_env: '1FARM' is not valid", 7),
    ("kind: sccache", "kind: ccache", "dist needs kind sccache", 4),
    ("kind: sccache", "kind: sccache\n      dsit: {}", "did you mean 'dist'", 5),
]


@pytest.mark.parametrize(("old", "new", "words", "line"), BAD)
def test_bad_values_are_located(tmp_path: Path, old: str, new: str, words: str, line: int) -> None:
    (tmp_path / "fdl.yml").write_text(FARM.replace(old, new))
    with pytest.raises((ManifestError, ManifestErrors)) as caught:
        build_request(load_manifest(tmp_path), {}, tmp_path)
    errors = caught.value.errors if isinstance(caught.value, ManifestErrors) else [caught.value]
    assert any(words in f"{e.message} {e.hint}" for e in errors), [e.message for e in errors]
    assert any(e.location is not None and e.location.line == line for e in errors)


def test_cache_sccache_on_the_command_line_keeps_the_farm(tmp_path: Path) -> None:
    request = _request(tmp_path, cache=("sccache", "--cache"))
    assert request.cache_dist is not None and request.cache is not None
    assert request.cache.origin == "--cache"
    other = _request(tmp_path, cache=("ccache", "--cache"))
    assert other.value("cache") == "ccache" and other.cache_dist is None


# --- the plan ------------------------------------------------------------------------------


def test_the_plan_points_sccache_at_a_private_config_and_never_holds_the_token(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path)
    assert plan.cache.dist is not None
    config = Path(plan.cache.dist.config_file)
    assert config.parent == plan.work_dir
    assert plan.env["SCCACHE_CONF"] == str(config)
    text = json.dumps(plan.to_json())
    assert TOKEN not in text
    assert plan.to_json()["cache"]["dist"]["token_from"] == "$FARM_TOKEN"
    assert not config.exists()  # planning writes nothing


def test_an_unset_token_variable_is_refused_at_plan_time(tmp_path: Path) -> None:
    request = _request(tmp_path, cpu=(True, "--cpu"), backend=("native", "--native"))
    with pytest.raises(ManifestError) as caught:
        plan_build(request, _facts(tmp_path))
    assert "FARM_TOKEN is not set" in caught.value.message
    assert caught.value.location is not None and caught.value.location.line == 6


def test_docker_builds_refuse_the_farm_at_its_line(tmp_path: Path) -> None:
    request = _request(tmp_path, cpu=(True, "--cpu"), backend=("docker", "--docker"))
    with pytest.raises(ManifestError, match="native backend only"):
        plan_build(request, _facts(tmp_path, FARM_TOKEN=TOKEN))


def test_a_farm_without_sccache_installed_is_a_warning(tmp_path: Path) -> None:
    request = _request(tmp_path, cpu=(True, "--cpu"), backend=("native", "--native"))
    facts = replace(_facts(tmp_path, FARM_TOKEN=TOKEN), tool_paths={"python3": "/usr/bin/python3"})
    plan = plan_build(request, facts)
    assert plan.cache.dist is None
    [problem] = [p for p in plan.problems if p.check == "cache"]
    assert "farm is not used: sccache is not installed" in problem.message


# --- before and after the build ------------------------------------------------------------


def _dist_plan(tmp_path: Path, **settings: object) -> DistPlan:
    fields = {"scheduler": "http://10.0.0.5:10600", "token_env": "FARM_TOKEN", **settings}
    return DistPlan(
        DistSettings(**fields),  # type: ignore[arg-type]
        config_file=str(tmp_path / "state" / "sccache-dist.conf"),
        toolchain_dir=str(tmp_path / "toolchains"),
    )


def _sccache(tmp_path: Path, status: str, seen: list[str]) -> FakeRunner:
    config = tmp_path / "state" / "sccache-dist.conf"

    def start(args: list[str]) -> Completed:
        seen.append(config.read_text())
        return Completed(args, 0, "", "")

    return FakeRunner(
        {
            ("/opt/bin/sccache", "--start-server"): start,
            ("/opt/bin/sccache", "--dist-status"): Completed([], 0, status, ""),
            ("/opt/bin/sccache", "--show-stats"): Completed([], 0, json.dumps(STATS), ""),
        },
        default=Completed([], 0, "", ""),
    )


def test_a_reachable_farm_starts_sccache_with_the_token_in_a_0600_file(tmp_path: Path) -> None:
    plan = replace(_plan(tmp_path).cache, program="/opt/bin/sccache", dist=_dist_plan(tmp_path))
    seen: list[str] = []
    runner = _sccache(tmp_path, CONNECTED, seen)
    asked: list[tuple[str, str]] = []
    used, warning = start_cache(
        plan, runner, {"FARM_TOKEN": TOKEN}, probe=lambda url, tok: asked.append((url, tok))
    )
    assert warning is None and used.dist is not None
    assert asked == [("http://10.0.0.5:10600", TOKEN)]
    config = Path(used.dist.config_file)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert f'token = "{TOKEN}"' in seen[0] and 'scheduler_url = "http://10.0.0.5:10600"' in seen[0]
    stats = cache_stats(used, runner, {})
    assert (stats.distributed, stats.local, stats.dist_errors) == (16, 1, 0)
    assert stats.summary() == "0 hits, 17 misses (0% hits); 16 compiles distributed, 1 local"


@pytest.mark.parametrize(
    ("status", "refusal", "words"),
    [
        (DOWN, None, "is not reachable (enabled, not connected"),
        (NO_SERVER, None, "has no build server"),
        (CONNECTED, "the scheduler refused the token (HTTP 401)", "refused the token"),
    ],
)
def test_a_farm_that_cannot_work_is_a_warning_and_a_local_build(
    tmp_path: Path, status: str, refusal: str | None, words: str
) -> None:
    plan = replace(_plan(tmp_path).cache, program="/opt/bin/sccache", dist=_dist_plan(tmp_path))
    seen: list[str] = []
    runner = _sccache(tmp_path, status, seen)
    used, warning = start_cache(plan, runner, {"FARM_TOKEN": TOKEN}, probe=lambda u, t: refusal)
    assert warning is not None and words in warning and warning.endswith("compiling locally")
    assert TOKEN not in warning
    assert used.dist is None and used.enabled  # the local cache still works
    assert "[dist]" not in seen[-1] and TOKEN not in Path(plan.dist.config_file).read_text()  # type: ignore[union-attr]
    assert runner.calls.count(["/opt/bin/sccache", "--start-server"]) == 2


def test_a_token_file_is_read_and_a_missing_one_is_a_usage_error(tmp_path: Path) -> None:
    token_file = tmp_path / "farm.token"
    plan = replace(
        _plan(tmp_path).cache,
        program="/opt/bin/sccache",
        dist=_dist_plan(tmp_path, token_env=None, token_file=token_file, origin="fdl.yml:7:15"),
    )
    with pytest.raises(UsageError, match=r"fdl.yml:7:15: cannot read the sccache-dist token"):
        start_cache(plan, _sccache(tmp_path, CONNECTED, []), {}, probe=lambda u, t: None)
    token_file.write_text(TOKEN + "\n")
    seen: list[str] = []
    start_cache(plan, _sccache(tmp_path, CONNECTED, seen), {}, probe=lambda u, t: None)
    assert f'token = "{TOKEN}"' in seen[0]


def test_client_config_is_toml_with_the_documented_keys(tmp_path: Path) -> None:
    import tomllib

    dist = _dist_plan(tmp_path)
    data = tomllib.loads(client_config(dist, 'tok"with\\quotes'))
    assert data["dist"]["scheduler_url"] == "http://10.0.0.5:10600"
    assert data["dist"]["auth"] == {"type": "token", "token": 'tok"with\\quotes'}
    assert data["dist"]["toolchains"] == [] and data["dist"]["cache_dir"] == dist.toolchain_dir
    assert tomllib.loads(client_config(dist, None)) == {}


def test_dist_status_answers() -> None:
    assert dist_status(CONNECTED) == (3, "3 build server(s), 96 CPUs")
    assert dist_status(DOWN)[0] is None
    assert dist_status('{"Disabled":"disabled"}') == (
        None,
        "distributed compilation is disabled in this sccache",
    )
    assert dist_status("garbage")[0] is None


def test_stats_without_a_farm_say_nothing_about_it() -> None:
    stats = _sccache_stats(json.dumps(STATS))
    assert stats.distributed is None and "distributed" not in stats.to_json()
    farm = _sccache_stats(json.dumps(STATS), dist=True)
    assert farm.to_json()["distributed"] == 16


def test_request_provenance_shows_the_farm_not_the_token(tmp_path: Path) -> None:
    request = _request(tmp_path)
    shown = request.provenance()["cache_dist"]["value"]
    assert shown == "http://10.0.0.5:10600 (token from $FARM_TOKEN)"
    assert isinstance(request.cache_dist, Setting)


# sccache 0.16.0 after `sccache nvcc -c SGD.cu -gencode ...sm_75 -gencode ...sm_120` on a
# loopback farm (measured; see tests/integration/test_build_sccache_dist.py)
NVCC_STATS = {
    "stats": {
        "compile_requests": 1,
        "cache_hits": {"counts": {}, "adv_counts": {}},
        "cache_misses": {
            "counts": {"PTX": 2, "CUDA (Device code)": 1, "CUDA": 1, "CUBIN": 2},
            "adv_counts": {
                "cuda [nvcc]": 1,
                "ptx [cicc]": 2,
                "cuda [cudafe++]": 1,
                "cubin [ptxas]": 2,
            },
        },
        "compilations": 7,
        "non_cacheable_compilations": 1,
        "dist_compiles": {"127.0.0.1:41002": 6},
        "dist_errors": 0,
    }
}


def test_farm_stats_break_compiles_down_by_compiler() -> None:
    stats = _sccache_stats(json.dumps(NVCC_STATS), dist=True)
    assert (stats.distributed, stats.local) == (6, 1)
    assert stats.compiled_by == (("cicc", 2), ("ptxas", 2), ("cudafe++", 1), ("nvcc", 1))
    assert stats.summary() == (
        "0 hits, 6 misses (0% hits); 6 compiles distributed, 1 local; "
        "compiled: 2 cicc, 2 ptxas, 1 cudafe++, 1 nvcc"
    )
    assert stats.to_json()["compiled_by"] == {"cicc": 2, "ptxas": 2, "cudafe++": 1, "nvcc": 1}
    cxx = {"c++ [gcc]": 2, "c [gcc]": 1, "odd key": 4}
    cxx_stats = {"stats": {**NVCC_STATS["stats"], "cache_misses": {"adv_counts": cxx}}}
    assert _sccache_stats(json.dumps(cxx_stats), dist=True).compiled_by == (
        ("odd key", 4),
        ("gcc", 3),
    )
    assert _sccache_stats(json.dumps(NVCC_STATS)).compiled_by == ()  # no farm: no breakdown
