"""``python -m fdl.refresh`` with no version named: what a fake PyPI on loopback has that
the tables lack becomes a reviewed-style diff of ``fdl/data/compat`` (offline, about 10 s;
one ``network`` test reads 0.9 MB of PyPI).

The fake PyPI publishes every release and toolkit the tables know, as the tables say, plus
planted drift: torch 2.15.0 asking Python >= 3.12, a patch 2.15.1, a new minor 2.16.0 (its
wheel's METADATA and a ``libtorch_cuda.so`` with a synthetic fatbin), a pre-release and a
yanked release (ignored); cuda-toolkit without 13.4.3 (the pin is not final), with 13.5.1
(an unchecked pin moves), 13.0.3 (a checked pin stays), and CUDA 13.6 (a new toolkit).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fdl._assets import data_dir
from fdl.compat import toolkits
from fdl.net import read_range
from fdl.refresh import Derived
from fdl.refresh._discover import python_floor, refresh_tables
from tests.support.fake_pypi import publish
from tests.support.faulty_http import FaultyServer

TODAY = "2026-11-28"


@pytest.fixture(scope="module")
def pypi() -> Iterator[FaultyServer]:
    with FaultyServer() as server:
        publish(server)
        yield server


def _derive(version: str) -> Derived:
    assert version == "13.6"
    archs = [*toolkits()[-1].targets.cubins]
    codes = sorted({t.code.removeprefix("sm_") for t in archs} | {"130", "130a", "130f"})
    return Derived(
        version,
        "nvidia_cuda_nvcc-13.6.20-py3-none-manylinux.whl",
        codes,
        {"gcc": 16, "clang": 23},
        "13.6.20",
    )


def test_python_floor_reads_the_lower_bound() -> None:
    assert python_floor(">=3.11") == "3.11"
    assert python_floor(">=3.8.0") == "3.8"
    assert python_floor(">=2.7, !=3.0.*") == "2.7"
    assert python_floor("<4") is None and python_floor(None) is None


def test_the_drift_becomes_a_minimal_diff_with_a_source_per_row(pypi: FaultyServer) -> None:
    tables = data_dir() / "compat"
    done = refresh_tables(read_range, tables, pypi=pypi.url("/pypi"), today=TODAY, derive=_derive)
    found = {(f.subject, f.fact): f for f in done.findings}
    assert set(found) == {
        ("torch 2.15", "patches"),
        ("torch 2.15", "python_min"),
        ("torch 2.16", "release"),
        ("CUDA 13.0", "image.version"),
        ("CUDA 13.4", "image.version"),
        ("CUDA 13.5", "image.version"),
        ("CUDA 13.6", "toolkit"),
    }
    assert not found[("CUDA 13.0", "image.version")].changed  # a checked tag is kept
    assert "cp312-cp313" in found[("torch 2.15", "python_min")].source
    after = {name: yaml.safe_load(text) for name, (_, text) in done.texts.items()}
    rows = {r["version"]: r for r in after["pytorch.yaml"]["releases"]}
    assert rows["2.15"]["source"]["python_min"] == "3.12"
    assert rows["2.15"]["patches"] == ["2.15.0", "2.15.1"]
    new = rows["2.16"]
    assert new["patches"] == ["2.16.0"] and new["source"]["python_min"] == "3.11"
    assert new["source"]["verified"] is False
    default = next(v for v in new["variants"] if v.get("default"))
    assert (default["name"], default["cuda"], default["cudnn"]) == ("cu132", "13.2", "9.26.0.51")
    assert default["archs"] == "7.5;9.0;12.0+PTX"  # streamed from the synthetic fatbin
    kits = {k["version"]: k for k in after["cuda.yaml"]["toolkits"]}
    assert kits["13.4"]["image"]["version"] == "13.4.1"  # 13.4.3 is not on this PyPI
    assert kits["13.5"]["image"]["version"] == "13.5.1"
    assert kits["13.0"]["image"]["version"] == "13.0.2"
    assert kits["13.6"]["inherit"] == "13.5" and kits["13.6"]["archs_add"] == "130 130a 130f"
    assert kits["13.6"]["compilers"] == {"gcc": 16, "clang": 23}
    assert kits["13.6"]["image"]["version"] == "13.6.0"
    assert after["cuda.yaml"]["ptx_jit_driver"]["versions"]["13.6"]["min"] is None
    # minimal: every line of the tables is kept (one changed line per edited fact)
    diff = done.diff()
    removed = [x for x in diff.splitlines() if x.startswith("-") and not x.startswith("---")]
    values = [x for x in removed if not x.lstrip("- ").startswith("#")]
    assert len(values) == 4, values  # python_min, patches, two image pins
    # the comments that went are the old sources of the values that changed, no others
    stale = [x.lstrip("- ") for x in removed if x.lstrip("- ").startswith("#")]
    assert stale[0].startswith("# 13.4.3: the newest final cuda-toolkit 13.4")
    assert stale[-2].startswith("# python_min 3.11: Requires-Python of torch 2.15.0")
    assert "python_min 3.11" not in done.texts["pytorch.yaml"][1]
    assert "+    # python_min 3.12: Requires-Python of torch 2.15.0's wheels is >=3.12" in diff
    assert diff.startswith("--- a/fdl/data/compat/cuda.yaml")
    # the new release's libtorch_cuda.so was streamed by Range requests, the rest not read
    assert pypi.requests_to("/files/torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert not pypi.requests_to("/files/torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not pypi.requests_to("/files/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert done.bytes_read > 0


def test_a_diff_dates_the_review(pypi: FaultyServer) -> None:
    """The tables' ``reviewed:`` date (what `$FDL_COMPAT_MAX_AGE_DAYS` counts from) is the
    day of the diff that changed them."""
    done = refresh_tables(
        read_range,
        data_dir() / "compat",
        pypi=pypi.url("/pypi"),
        today="2027-01-05",
        derive=_derive,
        device_code=False,
    )
    assert '+reviewed: "2027-01-05"' in done.diff()
    assert yaml.safe_load(done.texts["pytorch.yaml"][1])["reviewed"] == "2027-01-05"


def test_the_diff_applies_to_the_checkout(pypi: FaultyServer, tmp_path: Path) -> None:
    """What the workflow reviews: ``git apply`` takes the diff as it is printed."""
    done = refresh_tables(
        read_range,
        data_dir() / "compat",
        pypi=pypi.url("/pypi"),
        today=TODAY,
        device_code=False,
        derive=_derive,
    )
    compat = tmp_path / "fdl" / "data" / "compat"
    compat.mkdir(parents=True)
    for name, (before, _) in done.texts.items():
        (compat / name).write_text(before)
    (tmp_path / "drift.diff").write_text(done.diff())
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "apply", "drift.diff"], cwd=tmp_path, check=True)
    for name, (_, after) in done.texts.items():
        assert (compat / name).read_text() == after
    table = yaml.safe_load(done.texts["pytorch.yaml"][1])
    rows = {r["version"]: r for r in table["releases"]}
    # without streaming, the new release's archs are the previous default's, said so
    assert rows["2.16"]["variants"][0]["archs"] == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert "default variant's (unverified)" in done.texts["pytorch.yaml"][1]


def test_the_command_prints_the_findings_and_exits_1(pypi: FaultyServer) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fdl.refresh",
            "--pypi",
            pypi.url("/pypi"),
            "--json",
            "--metadata-only",
            "--no-toolkit-wheels",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    toolkit = next(f for f in report["findings"] if f["fact"] == "toolkit")
    assert not toolkit["changed"] and "python -m fdl.refresh toolkits 13.6" in toolkit["source"]
    assert report["diff"].count("+++ b/fdl/data/compat/") == 2


def test_an_unreachable_pypi_is_a_network_error_with_the_fix() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "--pypi", "http://127.0.0.1:9/pypi"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**__import__("os").environ, "FDL_NET_DEADLINE": "5"},
    )
    assert done.returncode == 5, done.stderr
    assert "cannot refresh the tables from PyPI" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.network
def test_the_real_pypi_agrees_with_the_tables_on_one_release() -> None:
    """torch 2.15.0 on PyPI (its project JSON, about 0.8 MB): Requires-Python and the Python
    tags the table's python_min must follow; the CUDA 13.4 image pin is a final release."""
    from fdl.compat import release, toolkit
    from fdl.refresh._discover import PYPI, published

    raw, _ = read_range(f"{PYPI}/torch/json", 0, None)
    [torch] = [p for p in published(json.loads(raw), "torch") if p.version == "2.15.0"]
    assert python_floor(torch.requires_python) == release("2.15").source.python_min
    assert f"cp{release('2.15').source.python_min.replace('.', '')}" == torch.python_tags[0]
    raw, _ = read_range(f"{PYPI}/cuda-toolkit/json", 0, None)
    finals = {p.version for p in published(json.loads(raw), "cuda-toolkit")}
    assert toolkit("13.4").image.version in finals and "13.4.0" not in finals


def test_write_applies_the_diff_to_the_tables_it_read(
    pypi: FaultyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--write`` (what the workflow runs) edits the tables under the package's data
    directory: here a copy, so the checkout's tables are left alone."""
    import shutil

    import fdl._assets
    from fdl.refresh.__main__ import main

    real = data_dir() / "compat"
    before = {p.name: p.read_text() for p in real.glob("*.yaml")}
    shutil.copytree(real, tmp_path / "compat")
    monkeypatch.setattr(fdl._assets, "data_dir", lambda: tmp_path)
    from tests.support.fake_crates import TORCH_SYS_BUILD, crate, serve_registry

    build = TORCH_SYS_BUILD.format(torch="2.13.0", cxx=17)
    index = serve_registry(
        pypi,
        {
            ("flodl", "0.8.0"): crate("flodl", "0.8.0", {}),  # in the table: not read
            ("tch", "0.27.0"): crate("tch", "0.27.0", {}),
            ("torch-sys", "0.27.0"): crate("torch-sys", "0.27.0", {"build.rs": build}),
        },
    ).removeprefix("sparse+")
    argv = ["--pypi", pypi.url("/pypi"), "--metadata-only", "--no-toolkit-wheels", "--write"]
    assert main([*argv, "--crates-index", index]) == 1
    frameworks = yaml.safe_load((tmp_path / "compat" / "frameworks.yaml").read_text())
    assert frameworks["frameworks"]["tch"]["releases"][-1]["versions"] == ["0.27.0"]
    written = yaml.safe_load((tmp_path / "compat" / "pytorch.yaml").read_text())
    assert {r["version"] for r in written["releases"]} >= {"2.15", "2.16"}
    assert (tmp_path / "compat" / "cuda.yaml").read_text() != before["cuda.yaml"]
    assert {p.name: p.read_text() for p in real.glob("*.yaml")} == before


def test_a_requires_python_with_a_line_break_stays_in_its_yaml_comment() -> None:
    """Issue 42, 1 and 3: PyPI's Requires-Python is written into pytorch.yaml's comment of
    the row's source; a line break in it (``>=3.12,\\n<4`` is a valid specifier set) would
    start a YAML line of its own."""
    with FaultyServer() as server:
        publish(server)
        body = read_range(server.url("/pypi/torch/json"), 0, None)[0]
        hostile = body.replace(b'">=3.12"', b'">=3.12,\\n<4"')
        assert hostile != body
        server.add("/pypi/torch/json", hostile, content_type="application/json")
        tables = data_dir() / "compat"
        done = refresh_tables(
            read_range, tables, pypi=server.url("/pypi"), today=TODAY, derive=_derive
        )
    text = done.texts["pytorch.yaml"][1]
    rows = {r["version"]: r for r in yaml.safe_load(text)["releases"]}
    assert rows["2.15"]["source"]["python_min"] == "3.12"
    line = next(line for line in text.splitlines() if "Requires-Python of torch 2.15" in line)
    assert line.lstrip().startswith("#") and "<4" in line
    assert not [other for other in text.splitlines() if other.lstrip().startswith("<4")]
