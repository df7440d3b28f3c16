"""The ``bench:`` section: named benchmarks (``fdl bench run|report|compare``).

Example::

    bench:
      epoch:
        run: [python3, train.py, --epochs, "1"]   # or: command: train (a project command)
        compare:                                  # the sides, run interleaved
          cpu: {libtorch: cpu}                    # LIBTORCH=cpu for this side
          cu130: {libtorch: cu130}
        rounds: 10
        warmup: 1                                 # rounds per side, not recorded
        figures:                                  # read from each round's output
          ms_epoch: 'ms/epoch[:= ]+([0-9.]+)'
        units: {ms_epoch: ms}                     # shown beside the figures
        metric: ms_epoch                          # what ratios and thresholds use
                                                  # (wall_s, cpu_s: measured by fdl)
        prepare: sync                             # before every round, untimed
        threshold: {percent: 5, mads: 3}

Only shapes are checked here; regexes and the metric name are checked by the planner
(``fdl.bench.plan_benchmarks``), with the value's ``file:line:col``.
"""

from __future__ import annotations

from fdl.manifest._nodes import MapNode
from fdl.manifest.schema import (
    Bool,
    Checker,
    Float,
    Int,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Spec,
    Str,
    for_generated_files,
)

Path = tuple[str, ...]

__all__ = ["BENCH", "NAME", "SECTIONS"]

NAME = r"[a-z0-9][a-z0-9_.-]*"
NAME_RULE = "lowercase letters, digits, '_', '.' and '-'"


def _command(example: str, description: str) -> Spec:
    """A command: a list, or a string split like a shell does."""
    return OneOf(Str(example=example), ListOf(Str()), description=description)


ARGV = _command(
    "python3 train.py --epochs 1",
    "A program and its arguments: a list, or a string split like a shell does.",
)

_RUNNABLE = {
    "run": ARGV,
    "command": Str(
        "A project command (from commands:) run as `fdl run <command>`.",
        pattern=r"[A-Za-z0-9][A-Za-z0-9_.:-]*",
        example="train",
    ),
    "image": Str(
        "A training image profile (images:); the side runs its program in a container, "
        "`fdl image run PROFILE -- ARGS` (fdl bench run builds the image first).",
        pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        example="train",
    ),
    "deploy": Str(
        "A deploy target (deploy:): each round submits the training image there and waits "
        "for the job (`fdl deploy submit TARGET --wait`); its arguments are the target's.",
        pattern=r"[a-z0-9][a-z0-9_.-]*",
        example="lab",
    ),
    "args": ListOf(Str(), "Arguments appended to the program or command."),
    "env": MapOf(Str(), "Environment variables set for the rounds."),
    "revision": Str(
        "A git revision; the side runs in a detached worktree of it, made for the run "
        "(at the project's path inside the repository) and removed after it.",
        pattern=r"[^\s-][^\s]*",
        example="main",
    ),
    "libtorch": Str(
        "A libtorch variant (sets LIBTORCH for the rounds), e.g. precompiled/cu130.",
        pattern=r"[A-Za-z0-9][A-Za-z0-9_./:-]*",
        example="precompiled/cu130",
    ),
    # hyperfine's names for the same three moments.
    "prepare": _command(
        "sync",
        "A command run before every round (warm-up too), untimed: clear a cache, reset a "
        "file (hyperfine's --prepare).",
    ),
    "setup": _command(
        "python3 make_data.py",
        "A command run once per side before its first round (hyperfine's --setup).",
    ),
    "cleanup": _command(
        "rm -rf out",
        "A command run once per side after its last round, also when the run stops early "
        "(hyperfine's --cleanup).",
    ),
}


_PROGRAMS = ("run", "command", "image", "deploy")


def _one_program(node: MapNode, path: Path, checker: Checker) -> None:
    given = [key for key in _PROGRAMS if key in node.entries]
    if len(given) > 1:
        checker.fail(
            node, path, f"set one of run:, command:, image: or deploy:, not {' and '.join(given)}"
        )


def _needs_program(node: MapNode, path: Path, checker: Checker) -> None:
    _one_program(node, path, checker)
    sides = node.entries.get("compare")
    side_programs = isinstance(sides, MapNode) and all(
        isinstance(s, MapNode) and any(key in s.entries for key in _PROGRAMS)
        for s in sides.entries.values()
    )
    has_sides = isinstance(sides, MapNode) and bool(sides.entries)
    if not any(key in node.entries for key in _PROGRAMS) and not (has_sides and side_programs):
        checker.fail(
            node,
            path,
            "a benchmark needs run: (a program), command: (a project command), image: "
            "(a training image) or deploy: (a deploy target)",
            hint="e.g. run: [python3, train.py], or set run: on every side under compare:",
        )


SIDE: Spec = Obj(
    dict(_RUNNABLE),
    description="One side of a comparison; its keys override the benchmark's.",
    validators=[_one_program],
)

BENCHMARK: Spec = Obj(
    {
        **_RUNNABLE,
        "compare": MapOf(
            SIDE,
            "The sides compared (name -> overrides), run interleaved; the first is the "
            "baseline of ratios. Default: one side named after the benchmark.",
            key_pattern=NAME,
            key_example="cpu",
            key_rule=NAME_RULE,
        ),
        "rounds": Int("Recorded rounds per side (default 10).", minimum=1, maximum=100_000),
        "warmup": Int(
            "Warm-up rounds per side, not recorded (default 1).", minimum=0, maximum=100_000
        ),
        "warmup_seconds": Float(
            "Keep warming up (interleaved) until this many seconds passed (default 0)."
        ),
        "figures": MapOf(
            Str(example=r"ms/epoch[:= ]+([0-9.]+)"),
            "Figures read from each round's output: name -> regex with one group "
            "(the last match in the output counts).",
            key_pattern=NAME,
            key_example="ms_epoch",
            key_rule=NAME_RULE,
        ),
        "json_line": Bool(
            "Read the last output line that is a JSON object; its numeric values are figures."
        ),
        "metric": Str(
            "The figure ratios and thresholds use (default: the first figure, else wall_s; "
            "cpu_s is the CPU time of the round's processes, robust on a shared machine).",
            pattern=NAME,
            example="ms_epoch",
            rule=NAME_RULE,
        ),
        "threshold": Obj(
            {
                "percent": Float("Slower by more than this percent fails compare (default 5)."),
                "mads": Float(
                    "... and by more than this many scaled MADs of the baseline (default 3)."
                ),
            },
            description="When `fdl bench compare` calls a benchmark slower (both must hold).",
        ),
        "timeout": Float("Seconds one round may take (default: no limit)."),
        "units": MapOf(
            Str(example="ms"),
            "Each figure's unit, shown beside its values (wall_s and cpu_s are in s).",
            key_pattern=NAME,
            key_example="ms_epoch",
            key_rule=NAME_RULE,
        ),
    },
    description="A benchmark.",
    validators=[_needs_program],
)

BENCH: Spec = MapOf(
    BENCHMARK,
    "Benchmarks run by `fdl bench run` (name -> benchmark).",
    key_pattern=NAME,
    key_example="epoch",
    key_rule=NAME_RULE,
)

# A side's values are recorded in the results file (meant to be published) and printed
# by --dry-run: no secret outside env: (whose values are masked there).
SECTIONS: dict[str, Spec] = {"bench": for_generated_files(BENCH, lines=False)}
