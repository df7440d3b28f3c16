"""floDl's own CLI (``flodl-cli`` 0.5.3 from crates.io) and fdl on the same projects.

Projects: floDl 0.5.3's repository manifests (``tests/fixtures/flodl-0.5.3``) and the three
projects floDl's ``fdl init`` writes (mounted, ``--docker``, ``--native``), each with a
CPU and an active CUDA 12.6 libtorch variant. The same command lines go through both CLIs
under recording fakes of docker, cargo and python (``tests/support/reference_cli.py``), as
on a host (docker wraps the commands) and inside a container (they run directly), and
what the program would run is compared: program and arguments, working directory (the
container's for a service), the service, and the variables it gets. fdl may set more
variables (each listed in ``EXTRA_VARIABLES``, as in docs/reference-parity.md) and never
other values. Every other difference is a case of ``KNOWN``, with its row in that page.
fdl's ``--dry-run`` of each command, run by ``sh`` under the same fakes, must amount to
what floDl's CLI runs; ``--help`` of both lists the same project commands.

Cost: about 4 minutes on 2 cores under a load average of 11, of which the scaffolds take
1 (about 250 fdl processes, each a Python start of 0.3-1 s there; floDl's CLI takes
milliseconds). The first run on a machine builds floDl's CLI
(``scripts/setup-reference-cli.sh``: cargo install, about 4 minutes on 2 cores), kept in
``$FDL_TEST_CACHE/tools``; it skips locally and fails in CI when it cannot be built.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.support.libtorch_trees import make_tree
from tests.support.reference_cli import Effect, Sandbox, describe, effects, reference_binary

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "flodl-0.5.3"

# Variables fdl gives a program (or compose) that floDl's CLI does not, each with its
# reason in docs/reference-parity.md ("Environment").
EXTRA_VARIABLES = {
    "FDL_PROJECT_ROOT",  # floDl's CLI sets it for entries in containers only
    "LIBTORCH",  # tch-rs
    "LIBTORCH_PATH",  # floDl
    "Torch_DIR",
    "CMAKE_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "CUDA_VERSION",  # floDl's CLI: compose only
    "CUDA_TAG",
    "LIBTORCH_CUDA_PATH",  # compose: the active CUDA variant
    "LIBTORCH_HOST_PATH",  # floDl's CLI leaves it out for nested run: commands
    "FDL_VERBOSITY",  # fdl's own name for FLODL_VERBOSITY (-v, -q)
}


def _probes(ref: list[Effect]) -> tuple[list[Effect], list[Effect]]:
    """floDl's ``<entry> --fdl-schema`` probes, and the rest."""
    probes = [e for e in ref if e.argv[-1:] == ("--fdl-schema",)]
    return probes, [e for e in ref if e not in probes]


def _variants(project: Path) -> None:
    """A CPU and an active CUDA 12.6 libtorch 2.10.0, as floDl's CLI lays them out."""
    lib = project / "libtorch" / "precompiled"
    make_tree(lib / "cpu", "2.10.0+cpu")
    make_tree(lib / "cu126", "2.10.0+cu126", cubins=[50, 60, 70, 75, 80, 86, 90],
              cuda_needed=("libcudart.so.12",))  # fmt: skip
    (lib / "cpu" / ".arch").write_text("cuda=none\ntorch=2.10.0\narchs=cpu\nsource=precompiled\n")
    (lib / "cu126" / ".arch").write_text(
        "cuda=12.6\ntorch=2.10.0\narchs=5.0 6.0 7.0 7.5 8.0 8.6 9.0\nsource=precompiled\n"
    )
    (project / "libtorch" / ".active").write_text("precompiled/cu126")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    reference_binary()
    return Sandbox(tmp_path_factory.mktemp("sandbox"))


@pytest.fixture(scope="module")
def flodl_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """floDl 0.5.3's manifests, each ``fdl.yml.example`` copied to ``fdl.yml``."""
    project = tmp_path_factory.mktemp("flodl") / "flodl"
    shutil.copytree(FIXTURE, project)
    for example in project.rglob("fdl.yml.example"):
        example.rename(example.with_name("fdl.yml"))
    _variants(project)
    return project


@pytest.fixture(scope="module")
def scaffolds(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The projects floDl's ``fdl init`` writes, by mode (its prompts take their defaults
    without a terminal: mounted)."""
    parent = tmp_path_factory.mktemp("reference-init")
    made: dict[str, Path] = {}
    for mode, flags in (("mounted", []), ("docker", ["--docker"]), ("native", ["--native"])):
        got = sandbox.reference(["init", f"ref-{mode}", *flags], parent)
        assert got.code == 0, got.output
        project = parent / f"ref-{mode}"
        shutil.copy(project / "fdl.yml.example", project / "fdl.yml")
        _variants(project)
        made[mode] = project
    return made


def _commands(manifest: Path) -> dict[str, dict[str, str]]:
    data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    return {name: spec or {} for name, spec in (data.get("commands") or {}).items()}


def _run_commands(manifest: Path) -> list[str]:
    return sorted(name for name, spec in _commands(manifest).items() if "run" in spec)


def _mismatches(ref: list[Effect], ours: list[Effect]) -> list[str]:
    """How ``ours`` departs from ``ref``, beyond the variables fdl may add."""
    if len(ref) != len(ours):
        return [
            "different programs:",
            *(f"  floDl: {describe(e)}" for e in ref),
            *(f"  fdl:   {describe(e)}" for e in ours),
        ]
    problems = []
    for theirs, mine in zip(ref, ours, strict=True):
        for what in ("where", "program", "argv", "cwd", "project"):
            if getattr(theirs, what) != getattr(mine, what):
                problems.append(
                    f"{what}: floDl {getattr(theirs, what)!r}, fdl {getattr(mine, what)!r}"
                )
        for scope in ("env", "compose"):
            have, want = getattr(mine, scope), getattr(theirs, scope)
            for key, value in want.items():
                if have.get(key) != value:
                    problems.append(f"{scope} {key}: floDl {value!r}, fdl {have.get(key)!r}")
            extra = set(have) - set(want) - EXTRA_VARIABLES
            if extra:
                problems.append(f"{scope}: fdl adds {sorted(extra)}")
    return problems


def _compare(
    sandbox: Sandbox, project: Path, args: list[str], *, container: bool
) -> tuple[list[Effect], list[Effect], list[Effect]]:
    """What each CLI ran for ``args``: floDl's schema probes, the rest, and fdl's."""
    ref = sandbox.reference(args, project, container=container)
    ours = sandbox.ours(args, project, container=container)
    # floDl's `doc` and `ci` end with `test -f target/doc/...`: 1 when run directly here
    assert ours.code == ref.code, (ref.output, ours.output)
    return (*_probes(effects(sandbox, ref.calls)), effects(sandbox, ours.calls))


# entries that floDl's CLI asks `--fdl-schema` before it runs them (not cargo, no cache)
PROBED = {"bench", "flodl-hf convert", "flodl-hf verify-export"}


# --- floDl's repository ----------------------------------------------------------------

FLODL_ROOT = _run_commands(FIXTURE / "fdl.yml.example")
FLODL_NESTED = [
    ["test", "--", "-p", "foo", "a b", "--", "--ignored"],
    ["test-live", "--", "bert"],
    ["--no-append", "test", "--", "-p", "foo"],
    ["-vv", "check"],
    ["ddp-bench", "--epochs", "3"],
    ["ddp-bench", "validate"],
    ["ddp-bench", "solo-1", "--model", "resnet", "--tolerance", "0.5"],
    ["bench", "cpu"],
    ["flodl-hf", "parity", "bert"],
    ["flodl-hf", "convert", "nateraw/bert-base-uncased-emotion"],
    ["flodl-hf", "verify-export", "/tmp/out", "--hub-source", "a/b"],
]


@pytest.mark.parametrize("container", [False, True], ids=["host", "container"])
@pytest.mark.parametrize("args", [[name] for name in FLODL_ROOT] + FLODL_NESTED, ids=" ".join)
def test_flodl_repository_commands_run_the_same(
    sandbox: Sandbox, flodl_repo: Path, args: list[str], container: bool
) -> None:
    probes, ref, ours = _compare(sandbox, flodl_repo, args, container=container)
    assert ref, "floDl's CLI ran nothing"
    assert _mismatches(ref, ours) == []
    probed = " ".join(args[:2]) in PROBED or args[0] in PROBED
    assert [(e.program, e.argv[-1]) for e in probes] == (
        [(ref[0].program, "--fdl-schema")] if probed else []
    )


def test_nested_run_commands_run_in_the_directory_of_their_manifest(
    sandbox: Sandbox, flodl_repo: Path
) -> None:
    """Known difference: floDl's CLI runs a nested ``run:`` command where the service
    starts (``/workspace``); fdl in the container directory of the manifest declaring it,
    as it does on the host (docs/reference-parity.md, "Differences")."""
    _, ref, ours = _compare(
        sandbox, flodl_repo, ["flodl-hf", "example", "bert-embed"], container=False
    )
    assert [e.cwd for e in ref] == ["/workspace"]
    assert [e.cwd for e in ours] == ["/workspace/flodl-hf/examples"]
    assert [(e.program, e.argv) for e in ref] == [(e.program, e.argv) for e in ours]
    # on the host both run it in the manifest's directory
    _, ref, ours = _compare(
        sandbox, flodl_repo, ["flodl-hf", "example", "bert-embed"], container=True
    )
    assert _mismatches(ref, ours) == []


def test_entries_without_a_schema_cache_are_probed_by_flodl_only(
    sandbox: Sandbox, flodl_repo: Path
) -> None:
    """Known difference: before running a non-cargo entry without a cached schema
    (``benchmarks``: ``bash run.sh``), floDl's CLI asks ``<entry> --fdl-schema`` in its
    service first; fdl asks only for ``compile: true`` or ``--refresh-schema``."""
    probes, ref, ours = _compare(sandbox, flodl_repo, ["bench", "cpu"], container=False)
    assert [(e.where, e.program, e.argv, e.cwd) for e in probes] == [
        ("service:bench", "bash", ("run.sh", "--fdl-schema"), "/workspace")
    ]
    assert _mismatches(ref, ours) == []
    assert [(e.program, e.argv, e.cwd) for e in ours] == [
        ("bash", ("run.sh", "--cpu"), "/workspace/benchmarks")
    ]


def test_entries_get_the_separator_from_flodl_only(sandbox: Sandbox, flodl_repo: Path) -> None:
    """Known difference: after an entry's arguments, ``-- ARGS`` reaches the program with
    the ``--`` from floDl's CLI, without it from fdl (for fdl, ``--`` ends what it checks
    against the schema, as it ends fdl's own arguments for ``run:`` commands)."""
    args = ["ddp-bench", "--model", "resnet", "--", "x y"]
    _, ref, ours = _compare(sandbox, flodl_repo, args, container=False)
    assert ref[0].argv[-3:] == ("resnet", "--", "x y")
    assert ours[0].argv[-2:] == ("resnet", "x y")
    assert _mismatches([replace(ref[0], argv=(*ref[0].argv[:-2], "x y"))], ours) == []


def test_a_preset_outside_its_choices_is_refused_by_both(
    sandbox: Sandbox, flodl_repo: Path
) -> None:
    """floDl 0.5.3's own ``ddp-bench quick`` sets ``model: linear``, which its schema does
    not allow: both refuse it before anything runs; floDl's CLI with exit 1, fdl with 3
    (a manifest error) and the value's ``file:line:col`` (docs/reference-parity.md)."""
    ref = sandbox.reference(["ddp-bench", "quick"], flodl_repo)
    ours = sandbox.ours(["ddp-bench", "quick"], flodl_repo)
    assert (ref.code, ours.code) == (1, 3)
    assert ref.calls == [] and ours.calls == []
    assert "linear" in ref.stderr
    assert "ddp-bench/fdl.yml:87:23" in ours.stderr


@pytest.mark.parametrize("args", [[name] for name in FLODL_ROOT] + FLODL_NESTED, ids=" ".join)
def test_dry_run_prints_what_flodl_runs(
    sandbox: Sandbox, flodl_repo: Path, args: list[str]
) -> None:
    """fdl's ``--dry-run`` script, run by sh, amounts to what floDl's CLI runs."""
    ref = sandbox.reference(args, flodl_repo)
    head = args.index("--") if "--" in args else len(args)
    dry = sandbox.ours([*args[:head], "--dry-run", *args[head:]], flodl_repo)
    assert dry.code == 0, dry.output
    assert dry.calls == [] or all(c.program == "docker" and c.argv[:2] != ("compose", "run")
                                  for c in dry.calls)  # fmt: skip
    ran = sandbox.script(dry.stdout, flodl_repo)
    _, theirs = _probes(effects(sandbox, ref.calls))
    assert _mismatches(theirs, effects(sandbox, ran.calls)) == []


# --- projects floDl's `fdl init` writes ---------------------------------------------------


@pytest.mark.parametrize("container", [False, True], ids=["host", "container"])
@pytest.mark.parametrize("mode", ["mounted", "docker", "native"])
def test_reference_scaffolds_run_the_same(
    sandbox: Sandbox, scaffolds: dict[str, Path], mode: str, container: bool
) -> None:
    project = scaffolds[mode]
    failures = {}
    names = _run_commands(project / "fdl.yml")
    assert names, "the scaffold has no `run:` command to compare"
    for name in names:
        args = [name] if name != "run" else ["run", "run"]
        ref = sandbox.reference([name], project, container=container)
        ours = sandbox.ours(args, project, container=container)
        assert ref.code == 0 and ours.code == 0, (name, ref.output, ours.output)
        theirs = _probes(effects(sandbox, ref.calls))[1]
        problems = _mismatches(theirs, effects(sandbox, ours.calls))
        if not container:  # and fdl's dry run of it, run by sh
            dry = sandbox.ours([*args, "--dry-run"], project)
            ran = sandbox.script(dry.stdout, project)
            problems += _mismatches(theirs, effects(sandbox, ran.calls))
        if problems:
            failures[name] = problems
    assert failures == {}


# --- help -------------------------------------------------------------------------------


def _listed(text: str, heading: re.Pattern[str]) -> set[str]:
    """Command names of the section whose heading matches, up to the next blank line."""
    names: set[str] = set()
    inside = False
    for line in text.splitlines():
        if heading.match(line):
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            names.add(line.split()[0])
    return names


REF_COMMANDS = re.compile(r"^Commands:")
OUR_COMMANDS = re.compile(r"^Project commands")


@pytest.mark.parametrize("which", ["flodl", "mounted", "native"])
def test_help_lists_every_command_on_both(
    sandbox: Sandbox, flodl_repo: Path, scaffolds: dict[str, Path], which: str
) -> None:
    project = flodl_repo if which == "flodl" else scaffolds[which]
    declared = set(_commands(project / "fdl.yml"))
    ref = sandbox.reference(["--help"], project)
    ours = sandbox.ours(["--help"], project)
    assert ref.code == 0 and ours.code == 0
    assert _listed(ref.output, REF_COMMANDS) == declared
    assert _listed(ours.output, OUR_COMMANDS) == declared


@pytest.mark.parametrize("name", sorted(_commands(FIXTURE / "fdl.yml.example")))
def test_help_of_every_entry_on_both(sandbox: Sandbox, flodl_repo: Path, name: str) -> None:
    """``fdl <entry> --help`` works on both and shows what the entry runs (a ``run:``
    script) or what it holds (a nested manifest's commands)."""
    spec = _commands(flodl_repo / "fdl.yml")[name]
    ref = sandbox.reference([name, "--help"], flodl_repo)
    ours = sandbox.ours([name, "--help"], flodl_repo)
    assert ref.code == 0, ref.output
    assert ours.code == 0, ours.output
    # floDl's CLI asks a non-cargo entry for its schema when its help is asked (`bench`)
    assert [c.argv[-1].endswith("--fdl-schema") for c in ref.calls] == (
        [True] if name == "bench" else []
    )
    assert [c for c in ours.calls if c.argv[:2] == ("compose", "run")] == []
    if "run" in spec:
        # floDl's CLI shows the docker form with Rust's {:?} quoting (`\"-D warnings\"`)
        shown = spec["run"].split("&&")[0].strip().replace('"', "")
        assert shown in ref.output.replace("\\", "").replace('"', "")
        assert shown in ours.output.replace('"', "")
    else:
        child = flodl_repo / (spec.get("path") or name) / "fdl.yml"
        for sub in _commands(child):
            assert sub in ref.output
            assert sub in ours.output


def _nested_entries() -> list[list[str]]:
    """``[command, sub]`` for each command and preset one level down."""
    found = []
    for name, spec in _commands(FIXTURE / "fdl.yml.example").items():
        if "run" in spec:
            continue
        child = FIXTURE / (spec.get("path") or name) / "fdl.yml.example"
        found += [[name, sub] for sub in _commands(child)]
    return found


@pytest.mark.parametrize("args", _nested_entries(), ids=" ".join)
def test_help_of_every_nested_entry_on_both(
    sandbox: Sandbox, flodl_repo: Path, args: list[str]
) -> None:
    """``fdl <command> <sub-command or preset> --help`` works on both and both show its
    description: a nested manifest's own ``description:`` (the listing in the parent's help
    shows the one the command is declared with)."""
    parent = _commands(flodl_repo / "fdl.yml")[args[0]]
    folder = flodl_repo / (parent.get("path") or args[0])
    spec = _commands(folder / "fdl.yml")[args[1]]
    nested = spec["description"]
    if "path" in spec:
        data = yaml.safe_load((folder / spec["path"] / "fdl.yml").read_text(encoding="utf-8"))
        nested = data["description"]
    ref = sandbox.reference([*args, "--help"], flodl_repo)
    ours = sandbox.ours([*args, "--help"], flodl_repo)
    assert ref.code == 0, ref.output
    assert ours.code == 0, ours.output
    assert nested in ref.output
    assert nested in ours.output
