"""The one chooser (fdl.libtorch._choose): each source's pure offer, the ranking, the
preference table kept as data, and a damaged table's documented exit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fdl.errors import EnvironmentProblem, ExitCode, UsageError
from fdl.libtorch._choose import (
    SOURCES,
    Facts,
    Need,
    Rule,
    choose_source,
    gather_facts,
    load_preferences,
    offer,
)
from fdl.libtorch._needs import build_need, install_need
from tests.support.choose import CPU, CU130, Installed, Match, Remote


def ok(source: str, need: Need, facts: Facts | None = None) -> tuple[bool, str]:
    answer = offer(source, need, facts or Facts())
    return answer.ok, answer.why


def test_the_archive_serves_an_official_build_unless_the_platform_has_none() -> None:
    assert ok("archive", CU130) == (
        True,
        "PyTorch's official torch 2.14.1 cu130 build, the libtorch zip",
    )
    from dataclasses import replace

    assert ok("archive", replace(CU130, archives=False))[0] is False
    assert ok("archive", replace(CU130, covers_all=False)) == (
        False,
        "no official libtorch 2.14.1 covers every GPU",
    )
    rocm = Need("setup", torch="2.9.1", variant="rocm70", rocm="7.0", archives=False)
    assert ok("archive", rocm)[0] is True  # ROCm zips exist for x86_64 only, as before


def test_the_wheel_serves_only_the_build_pypi_has() -> None:
    from dataclasses import replace

    assert ok("wheel", CU130)[0] is True
    other = ok("wheel", replace(CU130, pypi_variant="cu128"))
    assert other == (False, "PyPI's torch 2.14.1 wheel is cu128, not cu130")
    assert "CPU view" in ok("wheel", CPU)[1] and ok("wheel", CPU)[0] is False
    given = Facts(given={"wheel": "the wheel /w/torch.whl"})
    assert ok("wheel", Need("libtorch install"), given) == (True, "the wheel /w/torch.whl")


def test_the_cpu_view_serves_a_cpu_need_only() -> None:
    assert ok("cpu-view", CPU)[0] is True
    assert ok("cpu-view", CU130) == (False, "a CPU view has no GPU code; the build is cu130")


def test_the_installed_torch_serves_only_the_very_build_planned() -> None:
    python = {"python": "/venv/bin/python"}
    same = Facts(installed=Installed("2.14.1+cu130", "2.14.1", "cu130", python))
    assert ok("installed", CU130, same) == (
        True,
        "torch 2.14.1+cu130 (cu130) is installed for /venv/bin/python: copied, nothing downloaded",
    )
    assert ok("installed", CPU, same)[0] is False  # a CPU plan never takes a CUDA build
    other = Facts(installed=Installed("2.13.0+cu128", "2.13.0", "cu128", python))
    assert ok("installed", CU130, other)[0] is False
    unknown = Facts(installed=Installed("2.14.1+cu130", "2.14.1", "cu130"))
    assert ok("installed", CU130, unknown)[0] is False
    assert ok("installed", CU130) == (False, "the user's Python was not looked at")
    looked = Facts(looked=frozenset({"installed"}))
    assert ok("installed", CU130, looked) == (False, "no torch installed for the user's Python")


def test_the_registry_serves_what_was_found_there_with_its_size() -> None:
    assert ok("registry", CU130)[1].startswith("no team registry")
    unread = Facts(registry="r.example/team/libtorch")
    assert ok("registry", CU130, unread) == (
        False,
        "the team's registry r.example/team/libtorch was not read",
    )
    empty = Facts(registry="r.example/team/libtorch", looked=frozenset({"registry"}))
    assert ok("registry", CU130, empty) == (
        False,
        "the team's registry r.example/team/libtorch holds no torch 2.14.1 variant that runs "
        "on these GPUs",
    )
    layers = {"layers": [{"size": 300}, {"size": 700}, {"size": "x"}]}
    found = Facts(registry="r", shared=Match(Remote(layers)))
    answer = offer("registry", CU130, found)
    assert (answer.ok, answer.bytes) == (True, 1000)
    rocm = Need("setup", torch="2.9.1", variant="rocm70", rocm="7.0")
    assert ok("registry", rocm, found)[0] is False


def test_the_build_serves_where_no_official_build_covers_the_gpus() -> None:
    from dataclasses import replace

    mixed = replace(
        CU130, covers_all=False, build=("fdl", "libtorch", "build", "--archs", "6.1,12.0")
    )
    assert ok("build", mixed) == (
        True,
        "a source build for these GPUs: fdl libtorch build --archs 6.1,12.0",
    )
    assert ok("build", CU130) == (False, "an official build covers every GPU")
    assert ok("build", replace(mixed, build=()))[0] is False


def test_a_directory_serves_only_when_named() -> None:
    assert ok("directory", CU130)[0] is False
    named = Facts(given={"directory": "/opt/libtorch"})
    assert ok("directory", CU130, named) == (True, "the libtorch tree at /opt/libtorch (copied)")


def test_ranking_puts_what_serves_first_then_what_was_asked_then_the_table() -> None:
    from dataclasses import replace

    choice = choose_source(CU130)
    assert choice.source == "archive"
    assert [o.source for o in choice.offers if o.ok] == ["archive", "wheel"]
    assert [o.ok for o in choice.offers] == sorted((o.ok for o in choice.offers), reverse=True)
    # --from-wheel: the wheel before the archive, the registry ruled out
    asked = replace(
        CU130,
        asked=("installed", "wheel", "cpu-view"),
        refused=(("registry", "--from-wheel asks for PyPI's wheel"),),
    )
    found = Facts(registry="r", shared=Match(Remote({})))
    wheel = choose_source(asked, found)
    assert wheel.source == "wheel"
    assert next(o for o in wheel.offers if o.source == "registry").ok is False
    # without --from-wheel the registry's match comes first
    assert choose_source(CU130, found).source == "registry"
    # a table that prefers the wheel ranks it first
    table = tuple(sorted(load_preferences(), key=lambda rule: rule.source != "wheel"))
    assert choose_source(CU130, table=table).source == "wheel"


def test_nothing_serves_is_no_choice() -> None:
    from dataclasses import replace

    none = choose_source(replace(CU130, covers_all=False))
    assert none.chosen is None and none.to_json()["chosen"] is None
    assert any("[no]" in line for line in none.lines())


def test_the_json_and_the_text_show_the_same_ranked_offers() -> None:
    choice = choose_source(CU130)
    data = choice.to_json()
    assert data["chosen"] == "archive"
    assert {"source", "ok", "why", "bytes", "time", "trust"} == set(data["offers"][0])
    lines = choice.lines()[1:]
    assert [line.split(". ", 1)[1].split(" ", 1)[0] for line in lines] == [
        o["source"] for o in data["offers"]
    ]
    assert "[chosen]" in lines[0]


def test_only_the_named_source_serves_an_install() -> None:
    need, given = install_need(
        directory=Path("/opt/libtorch"),
        wheel=None,
        python=None,
        torch=None,
        from_wheel=False,
        from_registry=False,
        cpu=False,
        registry="r",
        pinned_cpu=False,
    )
    choice = choose_source(need, Facts(given=given))
    assert choice.source == "directory"
    assert all(not o.ok for o in choice.offers[1:])
    assert "not asked for" in choice.offers[-1].why


# install_need's keywords as `fdl libtorch install` passes them when no option is given
NO_INSTALL_OPTIONS: dict[str, Any] = {
    "directory": None,
    "wheel": None,
    "python": None,
    "torch": None,
    "from_wheel": False,
    "from_registry": False,
    "cpu": False,
    "registry": None,
    "pinned_cpu": False,
}


@pytest.mark.parametrize(
    ("options", "source"),
    [
        ({"from_wheel": True, "torch": "2.14"}, "wheel"),
        ({"from_wheel": True, "python": "/usr/bin/python3"}, "wheel"),
        ({"from_wheel": True, "cpu": True}, "cpu-view"),
        ({"from_wheel": True, "pinned_cpu": True}, "cpu-view"),
        ({"from_wheel": True, "python": "/p", "pinned_cpu": True}, "wheel"),
        ({"from_registry": True}, "registry"),
        ({"registry": "r"}, "registry"),  # set, and no other source named
        ({"from_wheel": True, "registry": "r"}, "wheel"),
    ],
)
def test_install_options_name_one_source(options: dict[str, Any], source: str) -> None:
    need, _ = install_need(**{**NO_INSTALL_OPTIONS, **options})
    assert need.asked == (source,) and need.only


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"from_registry": True, "from_wheel": True},
        {"directory": Path("/d"), "from_wheel": True},
        {"from_wheel": True, "python": "/p", "torch": "2.14"},
        {"from_wheel": True, "python": "/p", "cpu": True},
    ],
)
def test_install_options_that_name_no_source_or_two_are_usage_errors(
    options: dict[str, Any],
) -> None:
    with pytest.raises(UsageError):
        install_need(**{**NO_INSTALL_OPTIONS, **options})


def test_a_build_pulls_the_team_variant_unless_told_not_to() -> None:
    @dataclass
    class Plan:
        torch: str = "2.10.0"
        variant: str = "builds/sm61-sm120"

    found = Facts(registry="r", shared=Match(Remote({})))
    assert choose_source(build_need(Plan(), no_registry=False, fetch_only=False), found).source == (
        "registry"
    )
    own = choose_source(build_need(Plan(), no_registry=True, fetch_only=False), found)
    assert own.source == "build" and [o.source for o in own.offers] == ["build", "registry"]
    assert own.offers[1].why == "--no-registry: built here"
    assert choose_source(build_need(Plan(), no_registry=False, fetch_only=False)).source == "build"


def test_facts_are_gathered_only_where_an_offer_reads_them() -> None:
    asked: list[str] = []

    def look_up() -> object:
        asked.append("registry")
        return None

    def installed() -> object:
        asked.append("installed")
        return None

    facts = gather_facts(CU130, registry="r", look_up=look_up, installed=installed)
    assert asked == ["registry", "installed"]
    assert facts.looked == {"registry", "installed"}
    assert "holds no torch 2.14.1" in offer("registry", CU130, facts).why
    asked.clear()
    from dataclasses import replace

    refused = replace(CU130, refused=(("registry", "no"),), covers_all=False)
    gather_facts(refused, registry="r", look_up=look_up, installed=installed)
    assert asked == []  # registry ruled out; no official build covers: nothing to copy
    gather_facts(CU130, registry=None, look_up=look_up, installed=None)
    assert asked == []


def test_the_shipped_table_ranks_every_source_once_with_a_reason() -> None:
    rules = load_preferences()
    assert sorted(r.source for r in rules) == sorted(SOURCES)
    assert all(isinstance(r, Rule) and r.why and r.trust and r.time for r in rules)
    assert rules[0].source == "registry" and rules[-1].source == "build"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("prefer: [", "is not YAML"),
        ("schema: 2\nprefer: []\n", "is not schema 1"),
        ("schema: 1\n", "has no `prefer:` list"),
        ("schema: 1\nprefer: [x]\n", "rule 1 is not a mapping"),
        ("schema: 1\nprefer: [{source: archive}]\n", "rule 1 needs source, trust, time and why"),
        (
            "schema: 1\nprefer: [{source: ftp, trust: t, time: t, why: w}]\n",
            "unknown source 'ftp'",
        ),
        (
            "schema: 1\nprefer:\n" + "  - {source: archive, trust: t, time: t, why: w}\n" * 2,
            "names archive twice",
        ),
        ("schema: 1\nprefer: [{source: archive, trust: t, time: t, why: w}]\n", "does not rank"),
    ],
)
def test_a_damaged_table_exits_4_saying_what_is_wrong(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EnvironmentProblem) as raised:
        load_preferences(path)
    assert said in raised.value.message and raised.value.exit_code == ExitCode.ENVIRONMENT
    assert "reinstall fdl" in (raised.value.hint or "")


def test_a_missing_or_undecodable_table_exits_4(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as raised:
        load_preferences(tmp_path / "absent.yaml")
    assert "cannot be read (FileNotFoundError)" in raised.value.message
    (tmp_path / "bytes.yaml").write_bytes(b"schema: 1\n\xff\xfe")
    with pytest.raises(EnvironmentProblem) as raised:
        load_preferences(tmp_path / "bytes.yaml")
    assert "cannot be read (UnicodeDecodeError)" in raised.value.message
