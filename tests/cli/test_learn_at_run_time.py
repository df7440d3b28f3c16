"""A command that names a torch release newer than the tables reads it at run time from a
fake PyPI (loopback: its JSON and a small wheel with METADATA and a libtorch_cuda.so), then
plans with it, labelled as read from its artefacts; a dry run reads METADATA only; offline
and for a release PyPI lacks, an honest refusal (about 3 s; the slow test reads the
real PyPI, METADATA only: about 3.5 MB, 1-2 s)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support.ci import MATRIX, ci_project
from tests.support.fake_pypi import publish
from tests.support.faulty_http import FaultyServer

WHEEL = "/files/torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture
def pypi() -> Iterator[FaultyServer]:
    with FaultyServer() as server:
        publish(server)
        yield server


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pypi: FaultyServer):
    """An isolated machine (home, cache, no GPU unless given), PyPI at the fake server."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))  # compat reads it too
    monkeypatch.delenv("FDL_LIBTORCH_MIRROR", raising=False)
    monkeypatch.delenv("FLODL_HOME", raising=False)

    class Machine:
        cache = tmp_path / "cache"
        cwd = work
        env: ClassVar[dict[str, str]] = {
            "FDL_HOME": str(tmp_path / "home"),
            "FDL_CACHE_DIR": str(tmp_path / "cache"),
            "FDL_PYPI_URL": pypi.url("/pypi"),
            "FDL_NVML": "0",
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }

        def gpus(self, *caps: str, driver: str = "610.10") -> None:
            lines = "".join(f"{i}, NVIDIA GPU, {c}, 8192, {driver}\\n" for i, c in enumerate(caps))
            script = bin_dir / "nvidia-smi"
            script.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
            script.chmod(0o755)

        def learned(self) -> dict[str, object]:
            return json.loads((self.cache / "compat" / "torch" / "2.16.json").read_text())

    return Machine()


@pytest.fixture
def fdl(run_fdl, machine):
    def invoke(*args: str, env: dict[str, str] | None = None):
        return run_fdl(list(args), cwd=machine.cwd, env={**machine.env, **(env or {})})

    return invoke


def test_a_dry_run_reads_metadata_only_and_plans_with_the_provenance(
    fdl, machine, pypi: FaultyServer
) -> None:
    result = fdl("libtorch", "download", "--torch", "2.16.0", "--cpu", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "newer than fdl's reviewed tables (they end at" in result.stderr
    assert "METADATA" in result.stderr and "kept in" in result.stderr
    assert "torch 2.16.0" in result.stdout
    assert "read from its artefacts" in result.output
    assert "by fdl at run time, not from fdl's reviewed tables" in result.output
    entry = machine.learned()
    assert entry["read_by"] == "fdl at run time"
    default = next(v for v in entry["variants"] if v.get("default"))  # type: ignore[attr-defined]
    assert default["archs_read"] is False and "archs" not in default
    # the next command plans from the cache: nothing is read again
    pypi.clear_log()
    again = fdl("libtorch", "download", "--torch", "2.16", "--cpu", "--dry-run", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["torch"] == "2.16.0"
    assert pypi.log == [] and "reading" not in again.stderr
    # no GPU: the plan checks no archs, so none are streamed
    plan = fdl("libtorch", "download", "--torch", "2.16.0", "--dry-run")
    assert plan.exit_code == 0, plan.output
    assert pypi.log == []


def test_a_dry_run_that_needs_the_archs_says_what_it_would_read(
    fdl, machine, pypi: FaultyServer
) -> None:
    machine.gpus("8.6")
    result = fdl("libtorch", "download", "--torch", "2.16.0", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "archs of torch 2.16.0's official cu132 build are not known" in result.stderr
    assert "a dry run does not stream them" in result.stderr and "360 MB" in result.stderr
    assert "python -m fdl.refresh learn 2.16.0" in result.stderr
    assert "Traceback" not in result.output
    assert machine.learned()["variants"][0]["archs_read"] is False


def test_a_real_run_streams_the_archs_its_plan_checks_and_plans_with_them(
    fdl, machine, pypi: FaultyServer
) -> None:
    machine.gpus("9.0")
    assert fdl("libtorch", "download", "--torch", "2.16.0", "--cpu", "--dry-run").exit_code == 0
    metadata_only = pypi.sent(WHEEL)
    pypi.clear_log()
    # the mirror answers 404: the command plans (reading the release), then fails to download
    mirror = pypi.url("/mirror")
    result = fdl("libtorch", "download", "--torch", "2.16.0", "--mirror", mirror)
    assert "streaming them from its wheel on PyPI" in result.stderr
    default = next(v for v in machine.learned()["variants"] if v.get("default"))  # type: ignore[attr-defined]
    assert default["archs"] == "7.5;9.0;12.0+PTX" and "archs_read" not in default
    assert pypi.sent(WHEEL) > metadata_only  # libtorch_cuda.so, streamed
    assert "reading its facts" not in result.stderr  # the METADATA was kept
    assert "cu132" in result.output and "read from its artefacts" in result.output
    assert result.exit_code == 5, result.output  # the download, not the planning
    assert "mirror" in result.stderr
    # the next plan reads nothing
    pypi.clear_log()
    plan = fdl("libtorch", "download", "--torch", "2.16.0", "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["variant"] == "cu132"
    assert pypi.log == []


def test_offline_the_refusal_stays_and_nothing_is_kept(fdl, machine) -> None:
    result = fdl(
        "libtorch",
        "download",
        "--torch",
        "2.16.0",
        "--cpu",
        "--dry-run",
        env={"FDL_PYPI_URL": "http://127.0.0.1:9/pypi"},
    )
    assert result.exit_code == 5, result.output
    assert "torch 2.16.0 is newer than fdl's compatibility tables" in result.stderr
    assert "cannot be read from PyPI" in result.stderr
    assert "use --torch 2." in result.stderr
    assert "Traceback" not in result.output
    assert not (machine.cache / "compat").exists()


@pytest.mark.parametrize(
    "body",
    [b"[" * 200_000 + b"]" * 200_000, b'{"releases": []', b'["not", "a", "project"]'],
    ids=["nested 200k deep", "cut short", "a list"],
)
def test_a_pypi_answering_nonsense_is_refused_with_its_exit(
    fdl, machine, pypi: FaultyServer, body: bytes
) -> None:
    """A hostile or broken index: exit 5 with the address, never exit 70 (the nested case
    was a RecursionError reported as a bug)."""
    pypi.add("/pypi/torch/json", body, content_type="application/json")
    result = fdl("libtorch", "download", "--torch", "2.16.0", "--cpu", "--dry-run")
    assert result.exit_code == 5, result.output
    assert "is not PyPI's JSON for torch" in result.stderr
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert not (machine.cache / "compat" / "torch" / "2.16.json").exists()


def test_a_release_pypi_does_not_have_is_refused(fdl, machine) -> None:
    result = fdl("libtorch", "download", "--torch", "2.17.0", "--cpu", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "PyPI has no final torch 2.17.0" in result.stderr
    assert "Traceback" not in result.output
    assert not (machine.cache / "compat" / "torch" / "2.17.json").exists()


def test_a_manifest_pin_is_read_at_run_time_too(fdl, machine) -> None:
    (machine.cwd / "fdl.yml").write_text("libtorch:\n  torch: 2.16.0\n")
    result = fdl("libtorch", "download", "--cpu", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["torch"] == "2.16.0"
    assert any("read from its artefacts" in w for w in json.loads(result.stdout)["warnings"])
    assert "newer than fdl's reviewed tables" in result.stderr


@pytest.mark.slow
def test_the_newest_release_read_from_the_real_pypi_agrees_with_its_reviewed_row(
    run_fdl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the newest release taken out of the tables, a dry run reads it from PyPI
    (METADATA only, about 3.5 MB) and finds what its reviewed row says (about 2 s)."""
    import fdl.compat
    import fdl.compat.pytorch
    from fdl.compat import releases

    reviewed = releases()[-1]
    older = releases()[:-1]
    monkeypatch.setattr(fdl.compat, "releases", lambda: older)
    monkeypatch.setattr(fdl.compat.pytorch, "releases", lambda: older)
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FDL_PYPI_URL", "https://pypi.org/pypi")
    result = run_fdl(
        ["libtorch", "download", "--torch", reviewed.latest, "--cpu", "--dry-run", "--json"],
        cwd=tmp_path,
        env={"FDL_HOME": str(tmp_path / "home"), "FDL_NVML": "0"},
    )
    if result.exit_code == 5:
        from tests.support.artefacts import skip_or_fail

        skip_or_fail(f"PyPI cannot be read: {result.stderr[-300:]}")
    assert result.exit_code == 0, result.output
    assert "read from its artefacts" in " ".join(json.loads(result.stdout)["warnings"])
    entry = json.loads(
        (tmp_path / "cache" / "compat" / "torch" / f"{reviewed.version}.json").read_text()
    )
    default = next(v for v in entry["variants"] if v.get("default"))
    row = next(v for v in reviewed.variants if v.default)
    assert (default["name"], default["cuda"], default["cudnn"]) == (row.name, row.cuda, row.cudnn)
    assert entry["source"]["python_min"] == reviewed.source.python_min
    assert default["archs_read"] is False  # a dry run streams no libtorch_cuda.so


def test_a_source_build_of_a_newer_release_plans_from_its_facts(fdl, machine) -> None:
    result = fdl("libtorch", "build", "--torch", "2.16.0", "--archs", "9.0", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "newer than fdl's reviewed tables" in result.stderr
    assert "--branch v2.16.0" in result.stdout


def test_init_with_a_newer_release_reads_it_and_says_its_notes_once(fdl, machine) -> None:
    result = fdl("init", "demo", "--template", "cpp", "--torch", "2.16.0", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "torch 2.16.0" in result.output and "kept in" in result.stderr
    assert result.stderr.count("using the defaults") == 1  # the command ran twice


def test_a_ci_pin_is_read_at_run_time_too(run_fdl, machine) -> None:
    manifest = MATRIX.replace(
        "  variants: [cpu, cu130, build:pascal-blackwell]", "  variants: [cpu]"
    )
    manifest = manifest.replace("ci:\n", 'ci:\n  torch: "2.16.0"\n')
    project = ci_project(machine.cwd, manifest)
    result = run_fdl(["ci", "matrix", "--json"], cwd=project, env=machine.env)
    assert result.exit_code == 0, result.output
    assert "newer than fdl's reviewed tables" in result.stderr
    assert [v["torch"] for v in json.loads(result.stdout)["variants"]] == ["2.16.0"]
    assert machine.learned()["version"] == "2.16"
