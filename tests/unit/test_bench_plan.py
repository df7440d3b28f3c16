"""fdl.bench planner, figure parsing and comparison (pure; no processes)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fdl.bench import (
    WALL,
    Benchmark,
    BenchResult,
    Side,
    compare_results,
    parse_figures,
    plan_benchmarks,
    schedule,
)
from fdl.errors import ManifestError, UsageError
from fdl.manifest import load_manifest


def _manifest(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    (tmp_path / "fdl.yml").write_text(textwrap.dedent(text))
    return load_manifest(tmp_path, environ={})


def test_schedule_rotates_the_order_every_round() -> None:
    sides = tuple(Side(n, ("true",)) for n in "abc")
    slots = schedule(Benchmark("b", sides), 4)
    order = ["".join(s.side.name for s in slots[i : i + 3]) for i in range(0, 12, 3)]
    assert order == ["abc", "bca", "cab", "abc"]
    assert [s.position for s in slots[:3]] == [0, 1, 2]
    assert not any(s.warmup for s in slots)


def test_sides_inherit_and_override_and_set_libtorch(tmp_path: Path) -> None:
    manifest = _manifest(
        tmp_path,
        """\
        bench:
          epoch:
            command: train
            args: [--epochs, "1"]
            env: {OMP_NUM_THREADS: "4"}
            compare:
              cmd: {}
              gpu: {run: [./train], libtorch: precompiled/cu130, args: [--epochs, "2"]}
              script: {run: "python3 other.py --x 1"}
            rounds: 3
            threshold: {percent: 10}
        """,
    )
    (bench,) = plan_benchmarks(manifest, fdl_argv=("FDL",))
    cmd, gpu, script = bench.sides
    assert cmd.argv == ("FDL", "run", "train", "--epochs", "1")
    assert dict(cmd.env) == {"OMP_NUM_THREADS": "4"} and cmd.libtorch is None
    assert gpu.argv == ("./train", "--epochs", "2") and gpu.libtorch == "precompiled/cu130"
    assert script.argv == ("python3", "other.py", "--x", "1", "--epochs", "1")
    assert (bench.rounds, bench.warmup, bench.metric) == (3, 1, WALL)
    assert (bench.percent, bench.mads) == (10.0, 3.0)
    assert plan_benchmarks(manifest, rounds=7)[0].rounds == 7


def test_regex_with_two_groups_is_located(tmp_path: Path) -> None:
    manifest = _manifest(
        tmp_path,
        """\
        bench:
          epoch:
            run: [/bin/true]
            figures: {ms: '(a)(b)'}
        """,
    )
    with pytest.raises(ManifestError) as info:
        plan_benchmarks(manifest)
    assert "2 groups" in str(info.value)
    assert info.value.location is not None and info.value.location.line == 4


def test_unknown_names_and_missing_section(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "bench:\n  a: {run: [/bin/true]}\n")
    with pytest.raises(UsageError, match="unknown benchmark 'b'"):
        plan_benchmarks(manifest, ["b"])
    empty = _manifest(tmp_path, "description: x\n")
    with pytest.raises(ManifestError, match="declares no benchmarks"):
        plan_benchmarks(empty)


def test_a_benchmark_without_a_program_is_a_schema_error(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text("bench:\n  a: {rounds: 3}\n")
    with pytest.raises(ManifestError, match="needs run:"):
        load_manifest(tmp_path, environ={})


def test_parse_figures_regex_takes_the_last_match_and_json_line() -> None:
    bench = Benchmark("b", (), figures={"ms": r"ms/epoch: ([0-9.]+)"}, json_line=True)
    out = 'ms/epoch: 5\nms/epoch: 7.5\n{"loss": 0.25, "name": "x", "ok": true}\nbye\n'
    assert parse_figures(out, bench) == {"ms": 7.5, "loss": 0.25}
    assert parse_figures("nothing", bench) == {}


def _result(values: dict[str, list[float]]) -> BenchResult:
    return BenchResult("b", "ms", 5.0, 3.0, values)


def test_compare_needs_both_percent_and_mads() -> None:
    base = [_result({"x": [100.0, 101.0, 99.0, 100.0, 100.0]})]
    # +10 %, and 10 / 1.48 scaled MADs: slower.
    slow = compare_results(base, [_result({"x": [110.0, 111.0, 109.0, 110.0, 110.0]})])
    assert slow[0].slower and slow[0].percent == pytest.approx(10.0)
    # +10 % but within 3 scaled MADs of a noisy current side: not called slower.
    noisy = compare_results(base, [_result({"x": [110.0, 80.0, 140.0, 95.0, 125.0]})])
    assert not noisy[0].slower
    # Faster is never slower; a side missing from the baseline is skipped.
    assert not compare_results(base, [_result({"x": [50.0] * 5})])[0].slower
    assert compare_results(base, [_result({"y": [500.0] * 5})]) == []


def test_the_manuals_example_is_a_valid_bench_section(tmp_path: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "commands" / "bench.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "fdl.yml").write_text(example)
    (bench,) = plan_benchmarks(load_manifest(tmp_path, environ={}))
    assert [s.name for s in bench.sides] == ["cpu", "cu130"]
    assert bench.metric == "ms_epoch" and bench.timeout == 600.0


def test_a_project_command_cannot_switch_libtorch(tmp_path: Path) -> None:
    manifest = _manifest(
        tmp_path,
        """\
        bench:
          epoch:
            command: train
            compare:
              a: {}
              b: {libtorch: precompiled/cpu}
        """,
    )
    with pytest.raises(ManifestError, match="active libtorch variant") as info:
        plan_benchmarks(manifest)
    assert info.value.location is not None and info.value.location.line == 6


def test_an_image_side_runs_the_training_image_with_the_rounds_args(tmp_path: Path) -> None:
    manifest = _manifest(
        tmp_path,
        """\
        bench:
          steps:
            args: [--steps, "20"]
            compare:
              host: {run: [build/train], libtorch: precompiled/cpu}
              image: {image: train, args: [--steps, "20", --out, /workspace/runs]}
        """,
    )
    (bench,) = plan_benchmarks(manifest, fdl_argv=("FDL", "--set", "a=1"))
    host, image = bench.sides
    assert host.argv == ("build/train", "--steps", "20") and host.image is None
    assert image.argv == (
        "FDL", "--set", "a=1", "image", "run", "train", "--", "--steps", "20", "--out",
        "/workspace/runs",
    )  # fmt: skip
    assert image.image == "train" and image.libtorch is None
    assert image.as_dict()["image"] == "train"
    from fdl.bench import image_profiles

    assert image_profiles([bench]) == ["train"]


def test_an_image_side_cannot_switch_libtorch_and_needs_one_program(tmp_path: Path) -> None:
    manifest = _manifest(
        tmp_path,
        """\
        bench:
          steps:
            compare:
              image: {image: train, libtorch: precompiled/cpu}
        """,
    )
    with pytest.raises(ManifestError, match="carries its own libtorch variant") as info:
        plan_benchmarks(manifest)
    assert info.value.location is not None and info.value.location.line == 4
    (tmp_path / "fdl.yml").write_text("bench:\n  steps:\n    run: [./a]\n    image: train\n")
    with pytest.raises(ManifestError, match="set one of run:, command:, image: or deploy:"):
        load_manifest(tmp_path, environ={})


def test_a_deploy_side_submits_and_waits_for_the_targets_job(tmp_path: Path) -> None:
    manifest = _manifest(
        tmp_path,
        """\
        bench:
          steps:
            compare:
              here: {run: [./train]}
              cluster: {deploy: lab}
        """,
    )
    (bench,) = plan_benchmarks(manifest, fdl_argv=("FDL",))
    assert bench.sides[1].argv == ("FDL", "deploy", "submit", "lab", "--wait")
    refused = _manifest(
        tmp_path, "bench:\n  steps:\n    compare:\n      c: {deploy: lab, args: [x]}\n"
    )
    with pytest.raises(ManifestError, match="its arguments are the target's") as info:
        plan_benchmarks(refused)
    assert info.value.location is not None and info.value.location.line == 4
