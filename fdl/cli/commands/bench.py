"""``fdl bench``: run the manifest's benchmarks, report them, compare two runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from fdl.cli._progress import ProgressLine
from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group
from fdl.errors import EnvironmentProblem, ExitCode, UsageError

app = group(
    "bench",
    "Benchmarks with honest variance: interleaved rounds, median and scaled MAD, every "
    "round kept as JSON Lines.\n\nExample: fdl bench run && fdl bench report",
    no_args_is_help=True,
)

DEFAULT_RESULTS = Path(".fdl") / "bench" / "results.jsonl"
FileOption = Annotated[
    Path | None,
    typer.Option("--out", "-o", help="Results file (default: .fdl/bench/results.jsonl)."),
]


def _results(session: Session, given: Path | None) -> Path:
    if given is not None:
        return given if given.is_absolute() else session.cwd / given
    return session.manifest().directory / DEFAULT_RESULTS


@app.command()
def run(
    ctx: typer.Context,
    names: Annotated[list[str] | None, typer.Argument(help="Benchmarks (default: all).")] = None,
    rounds: Annotated[
        int | None, typer.Option("--rounds", "-n", min=1, help="Measured rounds per side.")
    ] = None,
    out: FileOption = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish",
            help="For publication: needs a clean git tree and idle GPUs; locks the GPU "
            "clocks for the run (restored after, Ctrl-C included).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run benchmarks: warm-up rounds, then measured rounds alternating between the
    compared sides; each round is appended to the results file as it ends.

    Example: fdl bench run epoch --rounds 20
    """
    from fdl.bench import benchmarks, run_benchmarks, summarize_rounds

    session: Session = ctx.obj
    manifest = session.manifest()
    selected = benchmarks(manifest.data, manifest.directory, names or [], rounds)
    results = _results(session, out)
    progress = ProgressLine(session.console, "bench")

    def on_round(result: object, index: int, total: int) -> None:
        from fdl.bench import RoundResult

        assert isinstance(result, RoundResult)
        step = result.step
        kind = "warm-up" if step.warmup else f"round {step.round + 1}"
        figure = f"{result.value:.4g} {step.benchmark.metric.unit}" if result.value else "-"
        progress.status(f"{step.benchmark.name} {step.side.name} {kind}: {figure}", index / total)

    with _published(session, manifest.directory) if publish else contextlib.nullcontext():
        try:
            done = run_benchmarks(
                selected,
                results,
                directory=manifest.directory,
                environ=session.environ,
                on_round=on_round,
            )
        finally:
            progress.close()
    measured = [r.to_json("") for r in done if not r.step.warmup]
    summary = summarize_rounds(measured)
    if as_json:
        session.console.json(
            {"results": str(results), "benchmarks": [s.to_json() for s in summary]}
        )
        return
    from fdl.bench import render_table

    session.console.out(render_table(summary), end="")
    session.console.info(f"every round is in {results} (fdl bench report {results})")


@app.command()
def report(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Argument(help="A results file (default: the project's).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Summarise a results file: median ± scaled MAD, stddev, range, outliers and each
    side's ratio to the first with a bootstrap interval, as a Markdown table.

    Example: fdl bench report .fdl/bench/results.jsonl
    """
    from fdl.bench import load_rounds, render_table, summarize_rounds

    session: Session = ctx.obj
    path = file if file is not None else _results(session, None)
    environments, rounds = load_rounds(path)
    summary = summarize_rounds(rounds)
    if as_json:
        session.console.json(
            {"environments": environments, "benchmarks": [s.to_json() for s in summary]}
        )
        return
    session.console.out(render_table(summary), end="")


@app.command()
def compare(
    ctx: typer.Context,
    baseline: Annotated[Path, typer.Argument(help="Results of the baseline.")],
    current: Annotated[Path, typer.Argument(help="Results to check against it.")],
    as_json: JsonOption = False,
) -> None:
    """Exit 1 when a benchmark is slower than the baseline beyond its threshold (percent
    and scaled MADs, `threshold:` in the manifest): a regression check for CI.

    Example: fdl bench compare main.jsonl pr.jsonl
    """
    from fdl.bench import compare as compare_rounds
    from fdl.bench import load_rounds

    session: Session = ctx.obj
    rows = compare_rounds(load_rounds(baseline)[1], load_rounds(current)[1])
    if not rows:
        raise UsageError(
            "the two files have no benchmark side in common", hint="compare runs of one bench"
        )
    if as_json:
        session.console.json([row.to_json() for row in rows])
    else:
        for row in rows:
            verdict = "REGRESSION" if row.regression else "ok"
            session.console.out(
                f"{row.bench}/{row.side}: {row.baseline.median:.4g} -> {row.current.median:.4g} "
                f"{row.unit} ({row.change_percent:+.1f}%, {row.change_mads:+.1f} scaled MADs; "
                f"threshold {row.percent:g}% and {row.mads:g}) {verdict}"
            )
    if any(row.regression for row in rows):
        raise typer.Exit(int(ExitCode.FAILURE))


@contextlib.contextmanager
def _published(session: Session, directory: Path) -> Iterator[None]:
    """``--publish``: a clean tree, idle GPUs, and their clocks locked for the run."""
    from fdl.runner import default_runner

    runner = default_runner()
    status = runner.run(["git", "-C", str(directory), "status", "--porcelain"], check=False)
    if status.returncode != 0:
        raise UsageError(
            "--publish needs a git repository", hint="run it in the project's repository"
        )
    if status.stdout.strip():
        raise UsageError(
            "--publish needs a clean git tree (results name the commit they measured)",
            hint="commit or stash your changes first",
        )
    if runner.which("nvidia-smi") is None:
        session.console.info(
            "no NVIDIA GPU here: --publish would lock each GPU's clocks at their maximum "
            "(nvidia-smi -lgc) and restore them after the run (nvidia-smi -rgc)"
        )
        yield
        return
    busy = runner.run(
        ["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
        check=False,
    ).stdout.strip()
    if busy:
        raise EnvironmentProblem(
            f"other processes use the GPUs: {' ; '.join(busy.splitlines()[:5])}",
            hint="stop them, or run without --publish",
        )
    clocks = runner.run(
        ["nvidia-smi", "--query-gpu=index,clocks.max.sm", "--format=csv,noheader,nounits"],
        check=False,
    ).stdout
    locked: list[str] = []
    try:
        for line in clocks.splitlines():
            index, _, top = (part.strip() for part in line.partition(","))
            if not index.isdigit() or not top.isdigit():
                continue
            runner.run(["nvidia-smi", "-i", index, "-lgc", f"{top},{top}"])
            locked.append(index)
            session.console.info(f"GPU {index}: clocks locked at {top} MHz")
        yield
    finally:
        for index in locked:
            runner.run(["nvidia-smi", "-i", index, "-rgc"], check=False)
            session.console.info(f"GPU {index}: clocks restored")
