"""The ``bench:`` section: named benchmarks for ``fdl bench run``.

Example::

    bench:
      epoch:
        description: one training epoch
        run: ./build/train --epochs 1      # a shell command, run in the manifest's directory
        sides:                             # what to compare (default: one side, `run`)
          cpu:  {env: {LIBTORCH: libtorch/precompiled/cpu}}
          cuda: {env: {LIBTORCH: libtorch/precompiled/cu130}}
        rounds: 10
        warmup: 2
        metric: {regex: 'ms/epoch: ([0-9.]+)', unit: ms}
        threshold: {percent: 5, mads: 3}
"""

from __future__ import annotations

from fdl.manifest.schema import Enum, Float, Int, MapOf, Obj, Spec, Str

__all__ = ["BENCH", "SECTIONS"]

ENV = MapOf(Str(), "Environment variables for the program.", key_pattern=r"[A-Za-z_][A-Za-z0-9_]*")

SIDE: Spec = Obj(
    {
        "run": Str("This side's command (default: the benchmark's `run:`)."),
        "env": ENV,
    },
    description="One side of the comparison.",
)

METRIC: Spec = Obj(
    {
        "regex": Str("A regular expression whose first group is the figure (e.g. ms/epoch)."),
        "json": Str("The key of the figure in a JSON object the program prints on a line."),
        "unit": Str("The figure's unit, for the report (default: ms of wall time)."),
        "better": Enum(("lower", "higher"), "Whether lower (default) or higher is better."),
    },
    description="What to read from the program's output per round (default: its wall time).",
)

BENCHMARK: Spec = Obj(
    {
        "description": Str("What the benchmark measures."),
        "run": Str("The command (a shell command line), run in the manifest's directory."),
        "sides": MapOf(SIDE, "What to compare: rounds alternate between the sides."),
        "env": ENV,
        "rounds": Int("Measured rounds per side (default 10).", minimum=1),
        "warmup": Int("Rounds per side run first and not counted (default 1).", minimum=0),
        "timeout": Float("Seconds one round may take (default 3600)."),
        "metric": METRIC,
        "threshold": Obj(
            {
                "percent": Float("Slower by more than this percent is a regression (default 5)."),
                "mads": Float("...and by more than this many scaled MADs (default 3)."),
            },
            description="When `fdl bench compare` calls a change a regression.",
        ),
    },
    description="A benchmark.",
)

BENCH: Spec = MapOf(BENCHMARK, "Benchmarks for `fdl bench run`, by name.")

SECTIONS: dict[str, Spec] = {"bench": BENCH}
