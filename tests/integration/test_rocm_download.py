"""`fdl libtorch download --rocm` end to end against a mirror on 127.0.0.1 serving an
official-looking ROCm zip: the plan (floDl's URL and directory), the install, the gfx
targets read from libtorch_hip.so's offload bundles, and what list/info/.arch say."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fdl.binaries.synthetic import build_elf, build_offload_bundle
from fdl.compat import libtorch_url
from tests.support import faulty_http
from tests.support.faulty_http import FaultyServer
from tests.support.libtorch_trees import libtorch_zip

faulty_server = faulty_http.faulty_server  # the fixture

GFX = ("gfx90a", "gfx942", "gfx1100")
FLODL_URL = (
    "https://download.pytorch.org/libtorch/rocm7.0/libtorch-shared-with-deps-2.10.0%2Brocm7.0.zip"
)


def _hip_library() -> bytes:
    triples = ["host-x86_64-unknown-linux-gnu-"]
    triples += [f"hipv4-amdgcn-amd-amdhsa--{g}" for g in GFX]
    return build_elf(
        {".hip_fatbin": build_offload_bundle(triples, compress="zstd", version=3)},
        needed=["libamdhip64.so.7"],
        soname="libtorch_hip.so",
    )


@pytest.fixture
def fdl(run_fdl, tmp_path: Path, faulty_server: FaultyServer):
    (tmp_path / "work").mkdir()
    env = {
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "FDL_LIBTORCH_MIRROR": faulty_server.url(""),
    }

    def invoke(*args: str):
        return run_fdl(["-q", *args], cwd=tmp_path / "work", env=env)

    return invoke


def test_the_plan_is_floDls_url_and_directory(fdl) -> None:
    planned = fdl("libtorch", "download", "--rocm", "7.0", "--dry-run", "--json")
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["upstream_url"] == FLODL_URL
    assert plan["name"] == "precompiled/rocm70"
    assert (plan["variant"], plan["rocm"], plan["vendor"], plan["cuda"]) == (
        "rocm7.0",
        "7.0",
        "amd",
        None,
    )
    assert plan["build_version"] == "2.10.0+rocm7.0"
    text = fdl("libtorch", "download", "--rocm", "7.1", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "(rocm7.1, ROCm 7.1)" in text.stdout and "precompiled/rocm71" in text.stdout


@pytest.mark.parametrize(
    ("args", "message", "fix"),
    [
        (["--rocm", "6.3"], "torch 2.10.0 has no ROCm 6.3 libtorch (it has ROCm 7.0, 7.1)", "--rocm 7.0"),
        (["--rocm", "7.0", "--torch", "2.9"], "torch 2.9.1 has no official ROCm libtorch", "2.10.0"),
        (["--rocm", "7.0;rm -rf /"], "is not a ROCm version", "--rocm 7.0"),
        (["--rocm", "7.0", "--cpu"], "--rocm cannot be combined with --cpu or --cuda", "one of them"),
    ],
)  # fmt: skip
def test_a_rocm_build_that_does_not_exist_is_refused(fdl, args, message, fix) -> None:
    refused = fdl("libtorch", "download", *args, "--dry-run")
    assert refused.exit_code == 2, refused.output
    assert message in refused.stderr and fix in refused.stderr


def test_the_rocm_build_installs_and_says_what_it_is(fdl, faulty_server, tmp_path) -> None:
    path = urlsplit(libtorch_url("2.10.0", "rocm7.0")).path
    zipped = libtorch_zip("2.10.0+rocm7.0", extra_libs={"lib/libtorch_hip.so": _hip_library()})
    faulty_server.add(path, zipped)
    result = fdl("libtorch", "download", "--rocm", "7.0", "--json")
    assert result.exit_code == 0, result.output
    variant = tmp_path / "home" / "libtorch" / "precompiled" / "rocm70"
    info = json.loads((variant / "variant.json").read_text())
    assert info["archs_found"]["gfx"] == list(GFX)
    assert info["cuda"] is None and info["extra"]["rocm"] == "7.0"
    arch = (variant / ".arch").read_text()
    assert "variant=rocm7.0" in arch and f"archs={' '.join(GFX)}" in arch and "cuda=none" in arch

    listed = fdl("libtorch", "list")
    assert listed.exit_code == 0, listed.output
    assert "precompiled/rocm70" in listed.stdout and "torch 2.10.0, ROCm 7.0 (AMD)" in listed.stdout
    shown = fdl("libtorch", "info", "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert (data["vendor"], data["rocm"]) == ("amd", "7.0")


def test_a_floDl_made_rocm_variant_is_recognised(fdl, tmp_path) -> None:
    """floDl's CLI writes .arch only (no variant.json): its ROCm build was listed as CPU."""
    variant = tmp_path / "home" / "libtorch" / "precompiled" / "rocm70"
    (variant / "lib").mkdir(parents=True)
    (variant / "lib" / "libtorch.so").write_bytes(build_elf(soname="libtorch.so"))
    (variant / ".arch").write_text(
        "cuda=none\ntorch=2.10.0\narchs=gfx908 gfx90a\nsource=precompiled\nvariant=rocm7.0\n"
    )
    listed = fdl("libtorch", "list")
    assert listed.exit_code == 0, listed.output
    assert "torch 2.10.0, ROCm 7.0 (AMD)" in listed.stdout
    assert "CPU" not in listed.stdout


def test_verify_reads_the_gfx_targets_and_holds_them_to_the_amd_gpus(
    fdl, faulty_server, tmp_path, monkeypatch
) -> None:
    path = urlsplit(libtorch_url("2.10.0", "rocm7.0")).path
    zipped = libtorch_zip("2.10.0+rocm7.0", extra_libs={"lib/libtorch_hip.so": _hip_library()})
    faulty_server.add(path, zipped)
    assert fdl("libtorch", "download", "--rocm", "7.0").exit_code == 0
    monkeypatch.setenv(
        "FLODL_TESTING_GPU_JSON",
        '[{"vendor":"amd","arch":"gfx90a"},{"vendor":"amd","arch":"gfx1030"}]',
    )
    verified = fdl("libtorch", "verify", "--json")
    assert verified.exit_code == 1, verified.output
    checks = {(c["group"], c["name"]): c for c in json.loads(verified.stdout)["checks"]}
    assert checks[("archs", "gpu code")]["message"] == f"libtorch_hip.so: {' '.join(GFX)}"
    assert checks[("gpus", "AMD GPU 0")]["severity"] == "ok"
    uncovered = checks[("gpus", "AMD GPU 1")]
    assert (
        uncovered["severity"] == "error"
        and "not covered by precompiled/rocm70" in uncovered["message"]
    )
    assert (
        uncovered["fix"] == "fdl libtorch download --rocm 7.0 --torch 2.10.0"
    )  # gfx1030: in the official list
    hip = tmp_path / "home" / "libtorch" / "precompiled" / "rocm70" / "lib" / "libtorch_hip.so"
    hip.write_bytes(_hip_library()[:300])  # truncated after install
    damaged = fdl("libtorch", "verify", "--json")
    assert damaged.exit_code == 1
    assert any(c["name"] == "unreadable" for c in json.loads(damaged.stdout)["checks"])
