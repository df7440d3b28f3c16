"""``fdl bench``: run the manifest's benchmarks, report and compare their rounds."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fdl.cli.commands._common import JsonOption, group

if TYPE_CHECKING:
    from fdl.bench import Benchmark, RoundDone
    from fdl.cli._session import Session

app = group(
    "bench",
    "Benchmarks declared in the manifest's bench: section: warm-up, rounds interleaved "
    "across the compared sides, every round kept as a JSON line; median ± scaled MAD "
    "reports and CI regression checks.\n\nExample: fdl bench run epoch",
    no_args_is_help=True,
)

DEFAULT_RESULTS = Path(".fdl") / "bench.jsonl"

OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help=f"The JSON Lines file rounds are appended to (default: {DEFAULT_RESULTS} "
        "in the project).",
    ),
]


def _fdl_argv(session: Session) -> tuple[str, ...]:
    """How the rounds start fdl (``command:`` and ``image:`` sides): this interpreter,
    with the global options this run was given, so a side sees the same manifest."""
    argv = [sys.executable, "-m", "fdl"]
    options = session.options
    if options.manifest is not None:
        argv += ["-f", str(session.manifest().path)]
    if session.env:
        argv += ["--env", session.env]
    for item in options.sets:
        argv += ["--set", item]
    return tuple(argv)


def _results_path(session: Session, output: Path | None) -> Path:
    if output is not None:
        return output if output.is_absolute() else session.cwd / output
    return session.manifest().directory / DEFAULT_RESULTS


def _progress(session: Session, benches: list[Benchmark]) -> Callable[[RoundDone], None]:
    units = {b.name: b for b in benches}

    def show(done: RoundDone) -> None:
        bench = units.get(done.bench)

        def figure(name: str, value: float) -> str:
            unit = bench.unit(name) if bench else None
            return f"{name}={value:g}" + (f" {unit}" if unit else "")

        figures = ", ".join(figure(k, v) for k, v in sorted(done.figures.items()))
        # Rounds are numbered from 1, as in the results file.
        phase = "warm-up" if done.slot.warmup else f"round {done.slot.round + 1}"
        session.console.info(
            f"{done.bench} [{done.index}/{done.total}] {phase} {done.slot.side.name}: "
            f"wall {done.wall_s:.3f} s, cpu {done.cpu_s:.3f} s"
            + (f", {figures}" if figures else "")
        )

    return show


def _schedule_lines(bench: Benchmark, shown: int = 6) -> list[str]:
    """Which side runs when: the warm-up rounds, then each recorded round; past ``shown``
    rounds of a kind, one line says the rotation goes on (the JSON has every round)."""
    from fdl.bench import round_order

    lines: list[str] = []
    for number in range(min(bench.warmup, shown)):
        lines.append(f"    warm-up {number + 1}: {' '.join(round_order(bench, number))}")
    if bench.warmup > shown:
        lines.append(f"    ... the same rotation to warm-up {bench.warmup}")
    if bench.warmup_seconds:
        lines.append(f"    warm-up continues, interleaved, until {bench.warmup_seconds:g} s passed")
    for number in range(min(bench.rounds, shown)):
        lines.append(f"    round {number + 1}: {' '.join(round_order(bench, number))}")
    if bench.rounds > shown:
        lines.append(f"    ... the same rotation to round {bench.rounds}")
    return lines


@app.command()
def run(
    ctx: typer.Context,
    names: Annotated[list[str] | None, typer.Argument(help="Benchmarks (default: all).")] = None,
    output: OutputOption = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds", "-n", min=1, max=100_000, help="Override every benchmark's rounds."
        ),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish",
            help="A publication run: needs a clean git tree, locks GPU clocks "
            "(nvidia-smi -lgc, restored on exit) and refuses while other processes use GPUs.",
        ),
    ] = False,
    clock: Annotated[
        int | None,
        typer.Option("--clock", min=1, help="SM clock (MHz) to lock with --publish."),
    ] = None,
    prepare: Annotated[
        str | None,
        typer.Option(
            "--prepare",
            help="A command run before every round of every side, untimed (overrides "
            "prepare: in the manifest), e.g. 'sync'.",
        ),
    ] = None,
    setup: Annotated[
        str | None,
        typer.Option(
            "--setup", help="A command run once per side before its first round (setup:)."
        ),
    ] = None,
    cleanup: Annotated[
        str | None,
        typer.Option(
            "--cleanup", help="A command run once per side after its last round (cleanup:)."
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the plan (sides, schedule) and stop."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Warm up, then run every side's rounds interleaved (A B, B A, ...), appending each
    round (wall time and the figures read from the output) to the results file.

    Example: fdl bench run epoch --rounds 20
    """
    from fdl.bench import (
        check_results_file,
        image_profiles,
        plan_benchmarks,
        plan_publish,
        prepare_images,
        published,
        round_order,
        run_benchmarks,
    )
    from fdl.runner import default_runner

    session: Session = ctx.obj
    manifest = session.manifest()
    hooks = {"prepare": prepare, "setup": setup, "cleanup": cleanup}
    benches = plan_benchmarks(
        manifest, names or (), fdl_argv=_fdl_argv(session), rounds=rounds, hooks=hooks
    )
    results = _results_path(session, output)
    check_results_file(results)  # before the dry run too: it refuses what the run would
    runner = default_runner()
    publication = plan_publish(runner, manifest.directory, clock) if publish else None
    if dry_run:
        plan = {
            "results": str(results),
            "benchmarks": [b.as_dict() for b in benches],
            "schedule": {b.name: [round_order(b, r) for r in range(b.rounds)] for b in benches},
            "publish": publication.as_dict() if publication else None,
        }
        if as_json:
            session.console.json(plan)
        else:
            from fdl.manifest import MASK

            for b in benches:
                session.console.out(
                    f"{b.name}: {len(b.sides)} side(s), {b.warmup} warm-up + {b.rounds} "
                    f"rounds each, interleaved; metric {b.metric}"
                )
                for side in b.sides:
                    shown = side.as_dict()  # values masked
                    env = " ".join(  # a value quoted as a shell reads it, the mask as is
                        _printable(f"{k}={v if v == MASK else shlex.quote(v)}")
                        for k, v in shown["env"].items()
                    )
                    argv = " ".join(_printable(shlex.quote(word)) for word in shown["argv"])
                    session.console.out(f"  {side.name}: {env + ' ' if env else ''}{argv}")
                    for hook in ("setup", "prepare", "cleanup"):
                        if shown[hook]:
                            words = " ".join(_printable(shlex.quote(w)) for w in shown[hook])
                            session.console.out(f"    {hook}: {words}")
                session.console.out("  schedule:")
                for line in _schedule_lines(b):
                    session.console.out(line)
            for note in publication.notes if publication else ():
                session.console.out(f"publish: {note}")
            session.console.out(f"rounds would be appended to {results}")
        raise typer.Exit(0)
    for note in publication.notes if publication else ():
        session.console.info(f"publish: {note}")
    images = prepare_images(
        manifest,
        image_profiles(benches),
        environ=session.environ,
        on_status=lambda line: session.console.info(f"image: {line}"),
    )
    extra = {"publish": publication.as_dict() if publication else None, "images": images}
    progress = _progress(session, benches)
    with published(publication, runner, manifest.directory):
        run_id = run_benchmarks(
            benches,
            results,
            runner=runner,
            cwd=manifest.directory,
            progress=progress,
            extra=extra,
            context=session.libtorch_context(),
        )
    if not as_json:
        session.console.info(f"run {run_id}: rounds in {results}")
    # This run's rounds, by its id: another run appending to the same file meanwhile
    # neither hides them nor adds its own.
    _report(session, results, run_id, as_json=as_json, extra={"results": str(results)})
    raise typer.Exit(0)


def _export(path: Path, text: str, force: bool) -> None:
    """Write an export; an existing file is replaced only with --force (and never
    through anything but a regular file)."""
    from fdl._files import atomic_write_text
    from fdl.errors import UsageError

    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise UsageError(
            f"{path} is not a regular file: the export is not written there",
            hint="pass the path of a new file",
        )
    if path.exists() and not force:
        raise UsageError(
            f"{path} exists: the export would replace it",
            hint="pass another path, or --force to replace it",
        )
    atomic_write_text(path, text)


def _report(
    session: Session,
    path: Path,
    run_id: str | None,
    *,
    as_json: bool,
    plot: Path | None = None,
    exports: dict[str, Path | None] | None = None,
    force: bool = False,
    extra: dict[str, str] | None = None,
) -> None:
    from fdl.bench import load_results, plot_results, render_csv, render_markdown

    header, results = load_results(path, run_id)
    renderers = {"csv": render_csv, "markdown": render_markdown}
    written: list[Path] = []
    for kind, target in (exports or {}).items():
        if target is not None:
            _export(target, renderers[kind](results), force)
            written.append(target)
    plots = plot_results(results, plot) if plot is not None else []
    if as_json:
        session.console.json(
            {
                "run": header["run"],
                **(extra or {}),
                "complete": all(r.complete for r in results),
                "environment": header.get("environment"),
                "benchmarks": [r.as_dict() for r in results],
                "plots": [str(p) for p in plots],
                "exports": [str(p) for p in written],
            }
        )
    else:
        session.console.out(render_markdown(results), end="")
        for done in plots:
            session.console.info(f"plot: {done}")
        for done in written:
            session.console.info(f"export: {done}")


@app.command()
def report(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Argument(help="Results file (default: the project's).")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run", help="A run id (default: the last run).")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also write a PNG per benchmark into this directory: rounds in the order "
            "run and their distributions (needs the plot extra: matplotlib).",
        ),
    ] = None,
    csv_file: Annotated[
        Path | None,
        typer.Option("--csv", help="Also write the table as CSV to this file (one row a side)."),
    ] = None,
    markdown_file: Annotated[
        Path | None,
        typer.Option("--markdown", help="Also write the Markdown table to this file."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing --csv/--markdown file.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A Markdown table per run: median ± scaled MAD, stddev, min – max, n, outliers
    (beyond 3 scaled MADs), each side's ratio to the first with a 95% bootstrap CI and
    the paired ratio (round by round) with its interval; incomplete runs are marked.

    Example: fdl bench report .fdl/bench.jsonl --csv bench.csv
    """
    session: Session = ctx.obj
    where = (session.cwd / plot) if plot is not None else None
    exports = {
        "csv": session.cwd / csv_file if csv_file is not None else None,
        "markdown": session.cwd / markdown_file if markdown_file is not None else None,
    }
    _report(
        session,
        _results_path(session, file),
        run_id,
        as_json=as_json,
        plot=where,
        exports=exports,
        force=force,
    )
    raise typer.Exit(0)


@app.command()
def compare(
    ctx: typer.Context,
    baseline: Annotated[Path, typer.Argument(help="The baseline results (JSON Lines).")],
    current: Annotated[Path, typer.Argument(help="The current results (JSON Lines).")],
    as_json: JsonOption = False,
) -> None:
    """Exit 1 when a benchmark side is slower than in the baseline by more than its
    threshold, in percent AND in scaled MADs, or its median is not a number (for CI
    regression checks).

    Example: fdl bench compare main.jsonl pr.jsonl
    """
    from fdl.bench import compare_results, load_results
    from fdl.errors import UsageError

    session: Session = ctx.obj
    _, old = load_results(_results_path(session, baseline))
    _, new = load_results(_results_path(session, current))
    verdicts = compare_results(old, new)
    if not verdicts:
        raise UsageError(
            f"{baseline} and {current} have no benchmark side in common "
            "(same benchmark, side and metric)",
            hint="compare results of the same benchmarks; `fdl bench report FILE` lists them",
        )
    slower = [v for v in verdicts if v.slower]
    if as_json:
        session.console.json({"slower": bool(slower), "verdicts": [v.as_dict() for v in verdicts]})
    else:
        for v in verdicts:
            mark = "NOT A NUMBER" if not v.finite else "SLOWER" if v.slower else "ok"
            session.console.out(
                f"{v.name}/{v.side} {v.metric}: {v.baseline:.4g} -> {v.current:.4g} "
                f"({v.percent:+.1f}%, {v.mads:+.1f} scaled MADs) {mark}"
            )
    raise typer.Exit(1 if slower else 0)


def _printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\x1b``): an argument is shown
    on one line, and never moves the terminal's cursor."""
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or char in "\u2028\u2029"
        else char
        for char in text
    )
