"""Source builds held to the rules of the torch release being built (issue 13): its CUDA
range, its TORCH_CUDA_ARCH_LIST grammar, and what to use instead when it cannot.

Table-driven: (torch release x toolkit x archs) -> a plan or a refusal with its fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.compat import (
    build_constraints,
    buildable_toolkits,
    load_table,
    parse_archs,
    preferred_toolkit,
    releases_that_build,
    toolkit,
)
from fdl.errors import EnvironmentProblem, UsageError
from fdl.libtorch.build import BuildRequest, MachineFacts, Nvcc, Setting, plan_build

TOOLS = {"gcc": "12.2.0", "g++": "12.2.0", "cmake": "3.28.3", "python3": "3.11.2", "git": "2.39"}


@pytest.fixture
def facts(tmp_path: Path) -> MachineFacts:
    return MachineFacts(
        libtorch_dir=tmp_path / "libtorch",
        nvcc=Nvcc(
            "13.0",
            "13.0.88",
            "/usr/local/cuda/bin/nvcc",
            toolkit("13.0").targets,
            "/usr/local/cuda",
        ),
        nvcc_reason=None,
        tools=TOOLS,
        tool_paths={"python3": "/usr/bin/python3"},
        docker="buildkit",
        docker_reason=None,
        cores=8,
        ram_gb=64.0,
        disk_free_gb=500.0,
    )


def request(backend: str = "docker", **values: str) -> BuildRequest:
    given = {k: Setting(v, f"--{k}") for k, v in values.items()}
    return BuildRequest(backend=Setting(backend, f"--{backend}"), **given)  # type: ignore[arg-type]


# torch, archs, --cuda -> CUDA the plan uses
PLANS = [
    ("2.4.1", "8.6", None, "12.4"),  # not 13.x: CUDA 13 came with 2.9; 12.4 is 2.4's newest
    ("2.7.1", "12.0", None, "12.8"),  # two-digit majors from 2.7
    ("2.7.1", "3.5", None, "11.8"),  # the newest release that still builds for Kepler
    ("2.10.0", "6.1;12.0", None, "12.9"),
    ("2.14.1", "6.1;12.0", None, "12.9"),
    ("2.14.1", "8.6", "12.6", "12.6"),  # 2.14's minimum, accepted
    ("2.14.1", "12.0a", None, "13.2"),
]


@pytest.mark.parametrize(("torch", "archs", "cuda", "chosen"), PLANS)
def test_the_plan_uses_a_toolkit_the_release_builds_with(
    facts: MachineFacts, torch: str, archs: str, cuda: str | None, chosen: str
) -> None:
    values = {"torch": torch, "archs": archs, **({"cuda": cuda} if cuda else {})}
    plan = plan_build(request(**values), facts)
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == archs
    assert plan.toolkit.startswith(f"CUDA {chosen}:") or plan.toolkit.startswith(f"CUDA {chosen} (")


# torch, archs, --cuda, backend -> (error type, words of the message, words of the fix)
REFUSALS = [
    (
        "2.14.1",
        "8.6",
        "12.4",
        "docker",
        EnvironmentProblem,
        "torch 2.14.1 needs CUDA 12.6 or newer",
        "--cuda 12.6",
    ),
    (
        "2.10.0",
        "3.5",
        None,
        "docker",
        UsageError,
        "nothing builds torch 2.10.0 for sm_35",
        "use torch 2.7.1 (--torch 2.7.1)",
    ),
    (
        "2.6.0",
        "12.0",
        None,
        "docker",
        UsageError,
        "torch 2.6.0 cannot target sm_120: torch 2.6.0's TORCH_CUDA_ARCH_LIST takes one-digit",
        "use torch 2.7.1 or newer",
    ),
    (
        "2.14.1",
        "12.0f",
        None,
        "docker",
        UsageError,
        "cannot target sm_120f",
        "ask for 12.0 (code for exactly that GPU) or 12.0a",
    ),
    (
        "2.8.0",
        "8.6",
        "13.0",
        "docker",
        EnvironmentProblem,
        "torch 2.8.0 builds with CUDA 12.x at most",
        "--cuda",
    ),
    (
        "2.8.0",
        "8.6",
        None,
        "native",  # the local nvcc is 13.0
        EnvironmentProblem,
        "torch 2.8.0 builds with CUDA 12.x at most",
        "`--docker` (CUDA 12.9",
    ),
]


@pytest.mark.parametrize(("torch", "archs", "cuda", "backend", "kind", "message", "fix"), REFUSALS)
def test_impossible_requests_are_refused_before_any_work_with_what_would_work(
    facts: MachineFacts,
    torch: str,
    archs: str,
    cuda: str | None,
    backend: str,
    kind: type[Exception],
    message: str,
    fix: str,
) -> None:
    values = {"torch": torch, "archs": archs, **({"cuda": cuda} if cuda else {})}
    with pytest.raises(kind) as caught:
        plan_build(request(backend, **values), facts)
    error = caught.value
    text = f"{error} {getattr(error, 'details', '') or ''}"
    assert message in text
    assert fix in (getattr(error, "hint", "") or "") + text


def test_rules_follow_the_release() -> None:
    assert build_constraints("2.4.1").cuda_min == "11.0"
    assert build_constraints("2.13.0").cuda_min == "12.1"
    assert build_constraints("2.14.1").cuda_min == "12.6"
    assert build_constraints("2.8.0").cuda_major_max == 12
    assert build_constraints("2.9.1").cuda_major_max == 13
    assert not build_constraints("2.6.0").two_digit_major
    assert build_constraints("2.7.1").two_digit_major
    assert all("f" not in build_constraints(r).suffixes for r in ("2.4.1", "2.14.1"))


def test_what_to_use_instead() -> None:
    assert releases_that_build(parse_archs("3.5"))[0] == "2.7.1"
    assert releases_that_build(parse_archs("12.0"))[-1] == "2.7.1"
    assert releases_that_build(parse_archs("12.0f")) == []
    assert buildable_toolkits("2.6.0", parse_archs("12.0")) == []
    choice = preferred_toolkit("2.4.1", parse_archs("8.6"))
    assert choice.version == "12.4" and choice.note is None


def test_every_rule_names_its_source() -> None:
    table = load_table("pytorch")["build_constraints"]
    for name, entries in table.items():
        for entry in entries:
            assert str(entry.get("source", "")).strip(), (name, entry)
            assert "since" in entry, (name, entry)


def test_the_driver_picks_a_toolkit_it_runs_or_is_warned_about(facts: MachineFacts) -> None:
    """Driver 570 runs CUDA 12.x, not 13.x: a build for this machine uses 12.9, and an
    explicit 13.0 is planned with a warning naming the driver it needs."""
    from dataclasses import replace

    machine = replace(facts, driver="570.86")
    plan = plan_build(request(torch="2.14.1", archs="12.0a"), machine)
    assert plan.toolkit.startswith("CUDA 12.9:") and "runs on driver 570.86" in plan.toolkit
    assert not [p for p in plan.problems if p.check == "driver"]
    asked = plan_build(request(torch="2.14.1", archs="12.0a", cuda="13.0"), machine)
    [warning] = [p for p in asked.problems if p.check == "driver"]
    assert "needs driver >= 580" in warning.message and warning.severity == "warning"
    unknown = plan_build(request(torch="2.14.1", archs="12.0a"), facts)  # no driver known
    assert unknown.toolkit.startswith("CUDA 13.2:")


def test_a_release_newer_than_the_tables_says_so() -> None:
    from fdl.compat import default_torch_version, release
    from fdl.errors import UsageError

    newest = default_torch_version()
    major, minor = (int(p) for p in newest.split(".")[:2])
    with pytest.raises(UsageError) as newer:
        release(f"{major}.{minor + 2}.0")
    assert "newer than fdl's compatibility tables" in newer.value.message
    assert newest in newer.value.message and f"--torch {newest}" in (newer.value.hint or "")
    with pytest.raises(UsageError) as older:
        release("1.13")
    assert "unknown PyTorch version" in older.value.message
