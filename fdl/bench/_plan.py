"""From the manifest's ``bench:`` section to benchmarks and their round schedule (pure)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fdl.errors import ManifestError, ManifestErrors, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.manifest import Manifest

__all__ = [
    "CPU",
    "WALL",
    "Benchmark",
    "Side",
    "Slot",
    "nested_quantifier",
    "plan_benchmarks",
    "schedule",
]

# The metrics every round has, measured by fdl: its wall time, and the CPU time (user +
# system) of its process tree as the kernel accounted it, both in seconds. On a shared,
# loaded machine the CPU time is the robust figure: it does not count others' work.
WALL = "wall_s"
CPU = "cpu_s"
MEASURED = (WALL, CPU)
DEFAULT_ROUNDS = 10
DEFAULT_WARMUP = 1
DEFAULT_PERCENT = 5.0
DEFAULT_MADS = 3.0


@dataclass(frozen=True)
class Side:
    """One side of a benchmark: the program run and its environment."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    # A git revision: the side runs in a detached worktree of it (made for the run).
    revision: str | None = None
    # A libtorch variant name: the executor sets its LIBTORCH, LD_LIBRARY_PATH, ...
    libtorch: str | None = None
    # A training image profile: the side runs `fdl image run PROFILE -- ARGS`.
    image: str | None = None
    # hyperfine's names: run before every round (untimed), once before the side's first
    # round, once after its last.
    prepare: tuple[str, ...] | None = None
    setup: tuple[str, ...] | None = None
    cleanup: tuple[str, ...] | None = None
    # env: names whose value the manifest tags ``!secret``.
    secret_env: frozenset[str] = frozenset()

    def shown_env(self) -> dict[str, str]:
        """The environment as published: a secret's value masked (a name that says it
        holds one, a ``!secret`` tag, a token's shape), every other value as set, since
        ``OMP_NUM_THREADS=4`` against ``=8`` is often what a benchmark compares."""
        from fdl.manifest import MASK, is_secret_key, token_kind

        return {
            name: MASK
            if name in self.secret_env or is_secret_key(name) or token_kind(str(value))
            else str(value)
            for name, value in sorted(self.env.items())
        }

    def as_dict(self) -> dict[str, Any]:
        """What the results file's header and ``--dry-run`` show: the environment with
        secrets masked (:meth:`shown_env`) and token-shaped arguments masked (the file is
        meant to be published)."""
        from fdl.manifest import redact

        return {
            "name": self.name,
            "argv": [redact(arg) for arg in self.argv],
            "env": self.shown_env(),
            "revision": self.revision,
            "libtorch": self.libtorch,
            "image": self.image,
            "prepare": [redact(arg) for arg in self.prepare] if self.prepare else None,
            "setup": [redact(arg) for arg in self.setup] if self.setup else None,
            "cleanup": [redact(arg) for arg in self.cleanup] if self.cleanup else None,
        }


@dataclass(frozen=True)
class Benchmark:
    """A planned benchmark: its sides and how to run and read them."""

    name: str
    sides: tuple[Side, ...]
    rounds: int = DEFAULT_ROUNDS
    warmup: int = DEFAULT_WARMUP
    warmup_seconds: float = 0.0
    figures: Mapping[str, str] = field(default_factory=dict)
    json_line: bool = False
    metric: str = WALL
    percent: float = DEFAULT_PERCENT
    mads: float = DEFAULT_MADS
    timeout: float | None = None
    # Each figure's unit (wall_s and cpu_s are in seconds).
    units: Mapping[str, str] = field(default_factory=dict)
    # Where each figure's regex is in the manifest (its errors at run time point there).
    where: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def unit(self, figure: str) -> str | None:
        return "s" if figure in MEASURED else self.units.get(figure)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sides": [s.as_dict() for s in self.sides],
            "rounds": self.rounds,
            "warmup": self.warmup,
            "warmup_seconds": self.warmup_seconds,
            "figures": dict(self.figures),
            "json_line": self.json_line,
            "metric": self.metric,
            "threshold": {"percent": self.percent, "mads": self.mads},
            "timeout": self.timeout,
            "units": {WALL: "s", CPU: "s", **self.units},
        }


@dataclass(frozen=True)
class Slot:
    """One scheduled execution: a warm-up or recorded round of one side."""

    warmup: bool
    round: int
    position: int
    side: Side


MAX_ROUNDS = 100_000
"""The most rounds (recorded, or warm-up) a benchmark may ask for: the schedule is planned
whole, and a hostile ``rounds: 1e12`` must end in a manifest error, not fill memory."""


def round_order(bench: Benchmark, number: int) -> list[str]:
    """The sides' names in the order round ``number`` (from 0) runs them: the order of
    :func:`schedule`, found without planning the rounds before it."""
    shift = number % len(bench.sides)
    return [side.name for side in bench.sides[shift:] + bench.sides[:shift]]


def schedule(bench: Benchmark, rounds: int, *, warmup: bool = False) -> list[Slot]:
    """``rounds`` rounds of every side, interleaved, the order rotated each round.

    With sides A B C: round 0 runs A B C, round 1 B C A, round 2 C A B, ... so slow
    drift (thermal, caches, other load) hits every side alike and no side always runs
    first after a warm-up.
    """
    sides = bench.sides
    slots: list[Slot] = []
    for r in range(rounds):
        shift = r % len(sides)
        for pos, side in enumerate(sides[shift:] + sides[:shift]):
            slots.append(Slot(warmup=warmup, round=r, position=pos, side=side))
    return slots


def _argv(spec: Mapping[str, Any], fdl_argv: Sequence[str]) -> list[str] | None:
    run = spec.get("run")
    if run is not None:
        return shlex.split(run) if isinstance(run, str) else [str(a) for a in run]
    command = spec.get("command")
    if command is not None:
        return [*fdl_argv, "run", str(command)]
    image = spec.get("image")
    if image is not None:
        return [*fdl_argv, "image", "run", str(image), "--"]
    target = spec.get("deploy")
    if target is not None:
        return [*fdl_argv, "deploy", "submit", str(target), "--wait"]
    return None


def _side(
    name: str, base: Mapping[str, Any], over: Mapping[str, Any], fdl_argv: Sequence[str]
) -> Side:
    own = _argv(over, fdl_argv)
    argv = own or _argv(base, fdl_argv) or []
    args = over.get("args") if over.get("args") is not None else base.get("args")
    env = {**(base.get("env") or {}), **(over.get("env") or {})}
    variant = over.get("libtorch") or base.get("libtorch")
    revision = over.get("revision") or base.get("revision")
    image = over.get("image") if own is not None else base.get("image")
    hooks = {
        hook: _command(over.get(hook) if over.get(hook) is not None else base.get(hook))
        for hook in HOOKS
    }
    return Side(
        name,
        (*argv, *(args or [])),
        env,
        str(revision) if revision else None,
        str(variant) if variant else None,
        str(image) if image else None,
        prepare=hooks["prepare"],
        setup=hooks["setup"],
        cleanup=hooks["cleanup"],
    )


HOOKS = ("prepare", "setup", "cleanup")


def _tagged(manifest: Manifest, key: str) -> frozenset[str]:
    """The names under ``key`` (an ``env:`` map) whose value is tagged ``!secret``."""
    from fdl.manifest import MapNode, is_secret_node

    node = manifest.node(tuple(key.split(".")))
    if not isinstance(node, MapNode):
        return frozenset()
    return frozenset(name for name, child in node.entries.items() if is_secret_node(child))


def _command(value: Any) -> tuple[str, ...] | None:
    if value is None or value in ("", []):
        return None
    return tuple(shlex.split(value) if isinstance(value, str) else [str(a) for a in value])


def _option(hook: str, value: str) -> tuple[str, ...] | None:
    try:
        return _command(value)
    except ValueError as exc:
        raise UsageError(
            f"--{hook} {value!r} cannot be split into arguments: {exc}",
            hint="close the quote (the command is split as a shell would, without running one)",
        ) from None


def nested_quantifier(pattern: str) -> bool:
    """Whether ``pattern`` repeats a group that is itself only a repeat (``(a+)+``,
    ``(?:x*|y)*``): the classic shape that makes a backtracking regex take exponential
    time on a near miss. (Other slow shapes are caught by the time bound at run time.)"""
    import importlib

    try:  # Python 3.11+: the parser lives in re (sre_* warn that they are deprecated)
        sre_constants: Any = importlib.import_module("re._constants")
        sre_parse: Any = importlib.import_module("re._parser")
    except ImportError:  # pragma: no cover - Python 3.10
        sre_constants = importlib.import_module("sre_constants")
        sre_parse = importlib.import_module("sre_parse")
    repeats = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}
    if hasattr(sre_constants, "POSSESSIVE_REPEAT"):
        repeats.add(sre_constants.POSSESSIVE_REPEAT)

    def unbounded(arg: Any) -> bool:
        return bool(arg[1] == sre_constants.MAXREPEAT or arg[1] > 1)

    def repeats_alone(items: Any) -> bool:
        """The body is one unbounded repeat, maybe inside groups or alternatives."""
        if len(items) != 1:
            return False
        op, arg = items[0]
        if op in repeats:
            return unbounded(arg)
        if op == sre_constants.SUBPATTERN:
            return repeats_alone(arg[-1])
        if op == sre_constants.BRANCH:
            return any(repeats_alone(branch) for branch in arg[1])
        return False

    def walk(items: Any) -> bool:
        for op, arg in items:
            if op in repeats and unbounded(arg) and repeats_alone(arg[2]):
                return True
            subs: list[Any] = []
            if op in repeats:
                subs = [arg[2]]
            elif op == sre_constants.SUBPATTERN:
                subs = [arg[-1]]
            elif op == sre_constants.BRANCH:
                subs = list(arg[1])
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                subs = [arg[1]]
            if any(walk(sub) for sub in subs):
                return True
        return False

    try:
        return walk(sre_parse.parse(pattern))
    except (re.error, RecursionError):
        return False


def _one(
    manifest: Manifest, name: str, spec: Mapping[str, Any], fdl_argv: Sequence[str]
) -> tuple[Benchmark | None, list[ManifestError]]:
    key = f"bench.{name}"
    errors: list[ManifestError] = []
    figures: dict[str, str] = dict(spec.get("figures") or {})
    for fig, pattern in figures.items():
        try:
            groups = re.compile(pattern).groups
        except re.error as exc:
            errors.append(
                manifest.error(f"{key}.figures.{fig}", f"{pattern!r} is not a regex: {exc}")
            )
            continue
        if nested_quantifier(pattern):
            errors.append(
                manifest.error(
                    f"{key}.figures.{fig}",
                    f"{pattern!r} repeats a group that repeats itself: on output that "
                    "almost matches it takes exponential time",
                    hint=r"repeat one thing once, e.g. '([0-9.]+) ms' rather than '(([0-9])+)+'",
                )
            )
            continue
        if groups != 1:
            errors.append(
                manifest.error(
                    f"{key}.figures.{fig}",
                    f"{pattern!r} has {groups} groups; exactly one must capture the number",
                    hint=r"e.g. 'ms/epoch[:= ]+([0-9.]+)'; use (?:...) for other groups",
                )
            )
    json_line = bool(spec.get("json_line"))
    metric = spec.get("metric") or (next(iter(figures)) if figures else WALL)
    if metric not in MEASURED and metric not in figures and not json_line:
        known = ", ".join([*MEASURED, *figures])
        errors.append(
            manifest.error(
                f"{key}.metric",
                f"{metric!r} is neither {WALL}, {CPU} nor one of the figures",
                hint=f"use one of: {known} (or set json_line: true to read it from JSON)",
            )
        )
    over = spec.get("compare") or {name: {}}
    places = [(key, spec)] + [(f"{key}.compare.{s}", o or {}) for s, o in over.items()]
    for where, given in places:
        for field_name in ("run", *HOOKS):
            value = given.get(field_name)
            if not isinstance(value, str):
                continue
            try:
                shlex.split(value)
            except ValueError as exc:
                errors.append(
                    manifest.error(
                        f"{where}.{field_name}",
                        f"{value!r} cannot be split into arguments: {exc}",
                        hint="close the quote, or write the command as a list: [program, arg]",
                    )
                )
    if errors:
        return None, errors
    sides = tuple(
        replace(
            _side(s, spec, o or {}, fdl_argv),
            secret_env=_tagged(manifest, f"{key}.env")
            | _tagged(manifest, f"{key}.compare.{s}.env"),
        )
        for s, o in over.items()
    )
    for side_name, given in over.items():
        o = given or {}
        deploys = o.get("deploy") or (o.get("run") is None and spec.get("deploy"))
        if deploys and (o.get("args") is not None or spec.get("args") is not None):
            where = f"{key}.compare.{side_name}" if o.get("args") is not None else key
            errors.append(
                manifest.error(
                    f"{where}.args",
                    "a deploy side runs the target's job: its arguments are the target's",
                    hint="set deploy.<target>.args (or a second target with other args)",
                )
            )
    for side, side_name in zip(sides, over, strict=True):
        if side.image and side.libtorch:
            where = f"{key}.compare.{side_name}" if (over[side_name] or {}).get("libtorch") else key
            errors.append(
                manifest.error(
                    f"{where}.libtorch",
                    f"the image {side.image!r} carries its own libtorch variant",
                    hint="choose the image's variant in images.<profile>.variant, or benchmark "
                    "a host program with run: [...] and libtorch:",
                )
            )
    for side_name, given in over.items():
        o = given or {}
        uses_command = o.get("command") or (o.get("run") is None and spec.get("command"))
        if uses_command and (o.get("libtorch") or spec.get("libtorch")):
            where = f"{key}.compare.{side_name}" if o.get("libtorch") else key
            errors.append(
                manifest.error(
                    f"{where}.libtorch",
                    "a project command always runs with the active libtorch variant",
                    hint="benchmark the program with run: [...] instead of command:, "
                    "or switch variants with `fdl libtorch activate` between runs",
                )
            )
    threshold = spec.get("threshold") or {}
    warmup_seconds = float(spec.get("warmup_seconds") or 0.0)
    if warmup_seconds < 0:
        errors.append(manifest.error(f"{key}.warmup_seconds", "must not be negative"))
    if errors:
        return None, errors
    bench = Benchmark(
        name=name,
        sides=sides,
        rounds=int(spec.get("rounds") or DEFAULT_ROUNDS),
        warmup=DEFAULT_WARMUP if spec.get("warmup") is None else int(spec["warmup"]),
        warmup_seconds=warmup_seconds,
        figures=figures,
        json_line=json_line,
        metric=str(metric),
        percent=float(threshold.get("percent") or DEFAULT_PERCENT),
        mads=float(threshold.get("mads") or DEFAULT_MADS),
        timeout=float(spec["timeout"]) if spec.get("timeout") else None,
        units={str(k): str(v) for k, v in (spec.get("units") or {}).items()},
        where={
            fig: origin.location()
            for fig in figures
            if (origin := manifest.origin(f"{key}.figures.{fig}")) is not None
        },
    )
    return bench, []


def plan_benchmarks(
    manifest: Manifest,
    names: Sequence[str] = (),
    *,
    fdl_argv: Sequence[str] = ("fdl",),
    rounds: int | None = None,
    hooks: Mapping[str, str | None] | None = None,
) -> list[Benchmark]:
    """The benchmarks ``names`` (default: all) of the manifest, checked and resolved.

    Args:
        manifest: The loaded project manifest.
        names: Benchmarks to run, in this order; empty for all, in manifest order.
        fdl_argv: How to start fdl, for benchmarks of a project ``command:``.
        rounds: Override every benchmark's ``rounds``.
        hooks: ``prepare``/``setup``/``cleanup`` command lines that override every
            side's (``--prepare`` ... on the command line).

    Raises:
        ManifestError: no ``bench:`` section, or a benchmark's regex or metric is wrong.
        UsageError: an unknown benchmark name.
    """
    section: dict[str, Any] = manifest.get("bench") or {}
    if not section:
        raise ManifestError(
            f"{manifest.source} declares no benchmarks",
            hint="add a bench: section, e.g. bench: {epoch: {run: [python3, train.py]}}",
        )
    unknown = [n for n in names if n not in section]
    if unknown:
        raise UsageError(
            f"unknown benchmark {', '.join(map(repr, unknown))}",
            hint=f"benchmarks in {manifest.source}: {', '.join(section)}",
        )
    planned: list[Benchmark] = []
    errors: list[ManifestError] = []
    for name in names or list(section):
        bench, found = _one(manifest, name, section[name] or {}, fdl_argv)
        errors.extend(found)
        if bench is not None:
            if rounds is not None:
                bench = Benchmark(**{**bench.__dict__, "rounds": rounds})
            given = {k: _option(k, v) for k, v in (hooks or {}).items() if v}
            if given:
                sides = tuple(Side(**{**s.__dict__, **given}) for s in bench.sides)
                bench = Benchmark(**{**bench.__dict__, "sides": sides})
            planned.append(bench)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ManifestErrors(errors)
    return planned
