"""What each source says to a user, asked for by mutation testing of the chooser
(``scripts/mutation.py chooser``): every offer's full reason for each case, its cost
fields, the ranked text plan (:meth:`Choice.lines`), its JSON and the ranking's ties."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from fdl.libtorch._choose import (
    Choice,
    Facts,
    Need,
    Offer,
    Rule,
    choose_source,
    gather_facts,
    offer,
)
from tests.support.choose import CPU, CU130, Installed, Match, Remote

ROCM = Need("setup", torch="2.9.1", variant="rocm70", rocm="7.0", archives=False)
SPLIT = replace(CU130, covers_all=False, build=("fdl", "libtorch", "build", "--arch", "sm_61"))
REG = "r.example/team/libtorch"


def says(source: str, need: Need, facts: Facts | None = None) -> tuple[bool, str]:
    answer = offer(source, need, facts or Facts())
    assert answer.source == source  # the name plans and --json show beside the reason
    return answer.ok, answer.why


# --- each source's reasons -------------------------------------------------------------


def test_the_registry_says_why_it_serves_or_not() -> None:
    assert says("registry", CU130, Facts(given={"registry": "r/x:1"})) == (True, "pull r/x:1")
    given = Facts(registry=REG, given={"registry": "r/x:1"})
    assert says("registry", ROCM, given) == (True, "pull r/x:1")  # named wins over ROCm
    assert says("registry", ROCM, Facts(registry=REG)) == (
        False,
        "the team's registry is not looked in for a ROCm build",
    )
    assert says("registry", CU130) == (
        False,
        "no team registry (libtorch.registry, $FDL_LIBTORCH_REGISTRY)",
    )
    assert says("registry", CU130, Facts(registry=REG)) == (
        False,
        f"the team's registry {REG} was not read",
    )
    looked = Facts(registry=REG, looked=frozenset({"registry"}))
    assert says("registry", CU130, looked) == (
        False,
        f"the team's registry {REG} holds no torch 2.14.1 variant that runs on these GPUs",
    )
    assert says("registry", replace(CU130, torch=None), looked)[1] == (
        f"the team's registry {REG} holds no the release variant that runs on these GPUs"
    )


@pytest.mark.parametrize(
    ("manifest", "size"),
    [
        ({"layers": [{"size": 100}, {"size": 250}, {"size": "9"}, "junk"]}, 350),
        ({"layers": [{"size": 7}]}, 7),
        ({"layers": []}, None),
        ({}, None),
        ("not a mapping", None),
    ],
)
def test_the_registry_counts_the_bytes_of_its_layers(manifest: Any, size: int | None) -> None:
    found = Facts(registry=REG, shared=Match(Remote(manifest)))  # type: ignore[arg-type]
    answer = offer("registry", CU130, found)
    assert (answer.ok, answer.why, answer.bytes) == (
        True,
        "pull r@sha256:0 (built by build, covers sm_120)",
        size,
    )


def test_the_installed_torch_says_why_it_serves_or_not() -> None:
    python = {"python": "/usr/bin/python3"}
    same = Installed("2.14.1+cu130", "2.14.1", "cu130", python)
    assert says("installed", CU130, Facts(installed=same)) == (  # type: ignore[arg-type]
        True,
        "torch 2.14.1+cu130 (cu130) is installed for /usr/bin/python3: copied, nothing downloaded",
    )
    assert says("installed", replace(CU130, covers_all=False)) == (
        False,
        "no official libtorch 2.14.1 covers every GPU",
    )
    assert says("installed", replace(ROCM, archives=True)) == (
        False,
        "a ROCm build is not copied from a Python's torch",
    )
    assert says("installed", CU130) == (False, "the user's Python was not looked at")
    assert says("installed", CU130, Facts(looked=frozenset({"installed"}))) == (
        False,
        "no torch installed for the user's Python",
    )
    other_build = Installed("2.14.1+cu128", "2.14.1", "cu128", python)
    assert says("installed", CU130, Facts(installed=other_build)) == (  # type: ignore[arg-type]
        False,
        "the user's Python has torch 2.14.1+cu128 (cu128), not 2.14.1 (cu130)",
    )
    other_release = Installed("2.13.0+cu130", "2.13.0", "cu130", python)
    assert says("installed", CU130, Facts(installed=other_release)) == (  # type: ignore[arg-type]
        False,
        "the user's Python has torch 2.13.0+cu130 (cu130), not 2.14.1 (cu130)",
    )
    unnamed = Installed("2.14.1", "2.14.1", None, python)
    assert says("installed", CU130, Facts(installed=unnamed)) == (  # type: ignore[arg-type]
        False,
        "the user's Python has torch 2.14.1 (its build), not 2.14.1 (cu130)",
    )
    unknown = Installed("2.14.1+cu130", "2.14.1", "cu130")
    assert says("installed", CU130, Facts(installed=unknown)) == (  # type: ignore[arg-type]
        False,
        "torch 2.14.1+cu130 (cu130) is installed, but by which Python is unknown",
    )


def test_the_archive_names_the_build_it_downloads() -> None:
    assert says("archive", CPU) == (
        True,
        "PyTorch's official torch 2.14.1 CPU build, the libtorch zip",
    )
    assert says("archive", ROCM) == (
        True,
        "PyTorch's official torch 2.9.1 ROCm 7.0 build, the libtorch zip",
    )
    assert says("archive", replace(CPU, torch=None)) == (
        True,
        "PyTorch's official the release CPU build, the libtorch zip",
    )
    assert says("archive", replace(CU130, archives=False)) == (
        False,
        "download.pytorch.org has no libtorch archive for this platform",
    )


def test_the_wheel_says_why_it_serves_or_not() -> None:
    assert says("wheel", CU130) == (
        True,
        "PyPI's torch 2.14.1 wheel (cu130) with its NVIDIA wheels",
    )
    assert says("wheel", SPLIT, Facts(given={"wheel": "/w/t.whl"})) == (True, "/w/t.whl")
    assert says("wheel", SPLIT) == (False, "no official libtorch 2.14.1 covers every GPU")
    assert says("wheel", ROCM) == (False, "PyPI has no ROCm wheel")
    assert says("wheel", CPU) == (
        False,
        "PyPI's torch wheel is a CUDA build: a CPU plan takes the CPU view",
    )
    assert says("wheel", replace(CU130, pypi_variant=None)) == (
        False,
        "PyPI's torch 2.14.1 wheel is another build, not cu130",
    )


def test_the_cpu_view_says_why_it_serves_or_not() -> None:
    assert says("cpu-view", CPU) == (
        True,
        "the CPU view of PyPI's torch 2.14.1 wheel: only what a CPU program loads",
    )
    assert says("cpu-view", SPLIT, Facts(given={"cpu-view": "/w/t.whl"})) == (
        True,
        "the CPU view of /w/t.whl: only what a CPU program loads",
    )
    assert says("cpu-view", replace(CPU, covers_all=False)) == (
        False,
        "no official libtorch 2.14.1 covers every GPU",
    )
    assert says("cpu-view", CU130) == (
        False,
        "a CPU view has no GPU code; the build is cu130",
    )
    assert says("cpu-view", ROCM) == (False, "a CPU view has no GPU code; the build is rocm70")


def test_the_directory_serves_only_a_named_tree() -> None:
    assert says("directory", CU130, Facts(given={"directory": "/opt/lt"})) == (
        True,
        "the libtorch tree at /opt/lt (copied)",
    )
    assert says("directory", CU130) == (False, "only a tree named with --from-dir")


def test_the_build_says_why_it_serves_or_not() -> None:
    assert says("build", SPLIT) == (
        True,
        "a source build for these GPUs: fdl libtorch build --arch sm_61",
    )
    asked = replace(CU130, asked=("build",), build=("fdl", "libtorch", "build"))
    assert says("build", asked) == (True, "a source build for these GPUs: fdl libtorch build")
    assert says("build", ROCM) == (False, "fdl plans a ROCm source build but does not run it")
    assert says("build", CU130) == (False, "an official build covers every GPU")
    assert says("build", replace(SPLIT, build=())) == (
        False,
        "torch 2.14.1 cannot be built for these GPUs",
    )


def test_a_refused_or_unasked_source_says_so() -> None:
    refused = replace(CU130, refused=(("registry", "--no-registry was given"),))
    assert says("registry", refused, Facts(given={"registry": "r/x:1"})) == (
        False,
        "--no-registry was given",
    )
    only = Need("install", only=True, asked=("directory",))
    assert says("archive", only) == (False, "not asked for (fdl install takes directory here)")
    both = replace(only, asked=("wheel", "directory"))
    assert says("archive", both) == (
        False,
        "not asked for (fdl install takes wheel or directory here)",
    )
    assert says("archive", replace(only, asked=())) == (
        False,
        "not asked for (fdl install takes nothing here)",
    )


# --- costs, ranking, the text plan and JSON ----------------------------------------------

TABLE = (
    Rule("directory", "yours", "seconds", "named"),
    Rule("archive", "official", "minutes", "zip"),
    Rule("registry", "team", "minutes", "team"),
    Rule("build", "yours", "hours", "last"),
)


def test_each_offer_carries_its_rules_cost_and_ties_go_by_the_command_line() -> None:
    facts = Facts(registry=REG, shared=Match(Remote({"layers": [{"size": 2_500_000_000}]})))  # type: ignore[arg-type]
    need = replace(CU130, sources=("archive", "registry", "build"))
    choice = choose_source(need, facts, table=TABLE)
    assert choice.to_json() == {
        "chosen": "archive",
        "offers": [
            {
                "source": "archive",
                "ok": True,
                "why": "PyTorch's official torch 2.14.1 cu130 build, the libtorch zip",
                "bytes": None,
                "time": "minutes",
                "trust": "official",
            },
            {
                "source": "registry",
                "ok": True,
                "why": "pull r@sha256:0 (built by build, covers sm_120)",
                "bytes": 2_500_000_000,
                "time": "minutes",
                "trust": "team",
            },
            {
                "source": "build",
                "ok": False,
                "why": "an official build covers every GPU",
                "bytes": None,
                "time": "hours",
                "trust": "yours",
            },
        ],
    }
    named = choose_source(replace(need, asked=("registry",)), facts, table=TABLE)
    assert [o.source for o in named.offers] == ["registry", "archive", "build"]
    assert named.source == "registry"


def test_the_text_plan_ranks_marks_and_costs_each_offer() -> None:
    choice = Choice(
        (
            Offer("registry", True, "pull r", 150_000_000, "minutes", "team"),
            Offer("archive", True, "zip", 1_000_000_000, "minutes", "official"),
            Offer("wheel", True, "wheel", 999_999_999, "", ""),
            Offer("directory", True, "tree", None, "seconds", "yours"),
            Offer("installed", True, "copy", None, "", ""),
            Offer("cpu-view", True, "view", 1_500_000, "", ""),
            Offer("wheel", True, "big", 1_050_000_000, "", ""),
            Offer("build", False, "no build", 5, "hours", "yours"),
        )
    )
    assert choice.lines() == [
        "  sources:  (best first)",
        "    1. registry [chosen]: pull r (150 MB, minutes, team)",
        "    2. archive [can]: zip (1.0 GB, minutes, official)",
        "    3. wheel [can]: wheel (1000 MB)",
        "    4. directory [can]: tree (seconds, yours)",
        "    5. installed [can]: copy",
        "    6. cpu-view [can]: view (2 MB)",
        "    7. wheel [can]: big (1.1 GB)",
        "    8. build [no]: no build",
    ]


def test_a_plan_where_nothing_serves_marks_every_offer_no() -> None:
    choice = Choice((Offer("build", False, "cannot", 2_500_000_000, "hours", "yours"),))
    assert choice.chosen is None and choice.source is None
    assert choice.lines() == ["  sources:  (best first)", "    1. build [no]: cannot"]
    assert Choice(()).to_json() == {"chosen": None, "offers": []}


def test_facts_are_gathered_only_for_what_the_command_takes() -> None:
    calls: list[str] = []

    def look_up() -> None:
        calls.append("registry")

    only = Need("pull", only=True, asked=("registry",))
    facts = gather_facts(only, registry=REG, look_up=look_up, given={"wheel": "w"})
    assert calls == ["registry"]
    assert (facts.registry, facts.shared, facts.installed) == (REG, None, None)
    assert (dict(facts.given), facts.looked) == ({"wheel": "w"}, frozenset({"registry"}))
    gather_facts(replace(only, asked=("directory",)), registry=REG, look_up=look_up)
    assert calls == ["registry"]  # the registry was not asked for: not looked in


def test_the_facts_gathered_are_the_ones_offers_read() -> None:
    match = Match(Remote({}))
    torch = Installed("2.14.1+cu130", "2.14.1", "cu130", {"python": "/usr/bin/python3"})
    facts = gather_facts(CU130, registry=REG, look_up=lambda: match, installed=lambda: torch)  # type: ignore[arg-type, return-value]
    assert facts.shared is match and facts.installed is torch
    assert facts.looked == frozenset({"registry", "installed"})
