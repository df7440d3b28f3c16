"""Manifest engine scaling: load + merge + explain for 1k, 10k, 100k leaves over 4 layers.

Each manifest has a base, an inherited file, an overlay and an env-var layer;
the overlay overrides a tenth of the leaves. Growth should be linear; target:
10k leaves explained in under 1 s.

    python bench/manifest_scale.py [--sizes 1000,10000,100000]

``--cli`` measures the CLI instead (issue 36): projects of 1,000 and 10,000 commands
spread over 20 layers (an inherit-from chain of 16 files, the base, an overlay, ``FDL__``
variables and ``--set``), and ``fdl config show`` / ``fdl config explain`` (with ``--json``
variants) run as subprocesses of the venv's console script with ``--env``, interleaved
over N rounds. Each run is its own child, waited for with ``os.wait4``: its wall time and
its own peak RSS. Goal: explain at most 1.5x show, in wall time and in memory.

    python bench/manifest_scale.py --cli [--commands 1000,10000] [--rounds 5] [--no-json]
        [--fdl before=OTHER/fdl --fdl after=.venv/bin/fdl]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from fdl.manifest import load_manifest
from fdl.manifest.render import render_explain, render_show


def write_layers(root: Path, leaves: int) -> dict[str, str]:
    """Write base/inherited/overlay files with ``leaves`` leaves; return env vars."""
    groups = max(1, leaves // 4)

    def body(prefix: str, step: int) -> str:
        lines = ["commands:"]
        for g in range(0, groups, step):
            lines.append(f"  cmd{g}:")
            lines.append(f"    description: {prefix} command {g}")
            lines.append(f"    run: make target{g} --flag {prefix}")
            lines.append(f"    append: --{prefix}")
            lines.append(f"    docker: {prefix}-service")
        return "\n".join(lines) + "\n"

    (root / "common.yml").write_text("description: common\n" + body("inherited", 2))
    (root / "fdl.yml").write_text("inherit-from: common.yml\ndescription: base\n" + body("base", 1))
    (root / "fdl.ci.yml").write_text(body("overlay", 10))
    return {"FDL__DESCRIPTION": "from env", "FDL__COMMANDS__CMD0__RUN": "make env"}


def measure(leaves: int) -> tuple[int, float, float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        environ = write_layers(root, leaves)
        start = time.perf_counter()
        manifest = load_manifest(root, env="ci", environ=environ)
        loaded = time.perf_counter()
        shown = render_show(manifest.tree)
        rendered = time.perf_counter()
        explanations = manifest.explain()
        text = render_explain(explanations)
        explained = time.perf_counter()
        assert shown and text
        count = len(explanations)
    return count, loaded - start, rendered - loaded, explained - rendered, explained - start


# --- the CLI at scale (issue 36) ------------------------------------------

FILE_LAYERS = 18  # 16 inherited + base + overlay; FDL__ and --set make 20
CLI_GOAL = 1.5  # explain / show, wall and peak RSS


def write_project(root: Path, commands: int) -> tuple[dict[str, str], list[str]]:
    """A project of ``commands`` commands over 20 layers; return its FDL__ vars and --set.

    Every file layer writes every command: command ``i`` is defined (four fields) by file
    layer ``i % 18`` and every other file layer sets one of its fields (which one turns
    with the layer), so each value has a story of several layers; the overlay deletes
    the ``docker`` of a tenth of the commands. A tenth of the commands get an ``FDL__``
    variable and a ``--set`` each.
    """
    fields = ("description", "run", "append", "docker")
    names = [f"inherit{k:02d}.yml" for k in range(FILE_LAYERS - 2)] + ["fdl.yml", "fdl.ci.yml"]
    for k, name in enumerate(names):
        lines = []
        if 0 < k < FILE_LAYERS - 1:
            lines.append(f"inherit-from: {names[k - 1]}")
        if k == FILE_LAYERS - 2:
            lines.append("description: base")
        lines.append("commands:")
        for i in range(commands):
            lines.append(f"  cmd{i}:")
            if i % FILE_LAYERS == k:
                lines += [
                    f"    description: command {i} from layer {k}",
                    f"    run: make target{i} --flag {k}",
                    f"    append: --layer{k}",
                    f"    docker: service{k}",
                ]
            elif k == FILE_LAYERS - 1 and i % 10 == 0:
                lines.append("    docker: null")
            else:
                field = fields[(i + k) % len(fields)]
                lines.append(f"    {field}: {field} of {i} from layer {k}")
        (root / name).write_text("\n".join(lines) + "\n")
    step = max(1, commands // 10)
    environ = {f"FDL__COMMANDS__CMD{i}__RUN": f"make env{i}" for i in range(0, commands, step)}
    environ["FDL__DESCRIPTION"] = "from env"
    sets = [f"commands.cmd{i + 1}.append=--set{i}" for i in range(0, commands, step)]
    return environ, sets


def run_child(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one run of ``argv``, its own child."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode()[-400:]}")
    return wall, usage.ru_maxrss


def measure_cli(
    scripts: dict[str, Path], commands: int, rounds: int, with_json: bool
) -> dict[tuple[str, str], tuple[list[float], list[int]]]:
    """Interleaved rounds of show/explain (and their --json) of every script: wall times
    and peak RSS per (script label, variant)."""
    kinds = [("show", ["config", "show"]), ("explain", ["config", "explain"])]
    if with_json:
        kinds += [
            ("show --json", ["config", "show", "--json"]),
            ("explain --json", ["config", "explain", "--json"]),
        ]
    variants = [((label, name), [str(script), *args]) for label, script in scripts.items()
                for name, args in kinds]  # fmt: skip
    results: dict[tuple[str, str], tuple[list[float], list[int]]] = {
        key: ([], []) for key, _ in variants
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        environ, sets = write_project(root, commands)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FDL__")}
        env.update(environ, NO_COLOR="1")
        options = ["--env", "ci"] + [arg for s in sets for arg in ("--set", s)]
        for _key, argv in variants:  # warm-up: byte-code, page cache
            run_child([argv[0], *options, *argv[1:]], root, env)
        for index in range(rounds):
            shift = index % len(variants)
            for key, argv in variants[shift:] + variants[:shift]:
                wall, rss = run_child([argv[0], *options, *argv[1:]], root, env)
                results[key][0].append(wall)
                results[key][1].append(rss)
    return results


def _scripts(given: list[str] | None) -> dict[str, Path]:
    """``LABEL=PATH`` (or ``PATH``) options as {label: script}; default: this venv's fdl."""
    scripts = {}
    for text in given or [str(Path(sys.executable).parent / "fdl")]:
        label, _, path = text.rpartition("=")
        script = Path(path).absolute()
        if not script.exists():
            raise SystemExit(f"{script} not found: pass --fdl [LABEL=]PATH-TO-fdl-SCRIPT")
        scripts[label or (path if given else "fdl")] = script
    return scripts


def cli_main(args: argparse.Namespace) -> None:
    scripts = _scripts(args.fdl)
    rows = []
    for commands in (int(c) for c in args.commands.split(",")):
        results = measure_cli(scripts, commands, args.rounds, not args.no_json)
        medians = {k: (statistics.median(t), statistics.median(r)) for k, (t, r) in results.items()}
        for (label, name), (times, rss) in results.items():
            against = (label, "show --json" if name == "explain --json" else "show")
            ratio = ""
            if name.startswith("explain"):
                wall_x = medians[label, name][0] / medians[against][0]
                rss_x = medians[label, name][1] / medians[against][1]
                met = "met" if wall_x <= CLI_GOAL and rss_x <= CLI_GOAL else "NOT met"
                ratio = f"{wall_x:.2f}x wall, {rss_x:.2f}x RSS ({met})"
            wall, peak = medians[label, name]
            rows.append(
                (
                    f"{commands:,}",
                    label,
                    name,
                    f"{wall:.2f} ({min(times):.2f}-{max(times):.2f})",
                    f"{peak / 1024:.0f} ({min(rss) / 1024:.0f}-{max(rss) / 1024:.0f})",
                    ratio,
                )
            )
    print(
        f"fdl config show/explain --env ci, 20 layers (16 inherited + base + overlay + "
        f"FDL__ + --set); median of {args.rounds} interleaved rounds (range)"
    )
    print_table(
        [
            "commands",
            "fdl",
            "fdl config",
            "wall s",
            "peak RSS MiB",
            f"explain/show (goal <= {CLI_GOAL}x)",
        ],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--cli", action="store_true", help="measure fdl config show/explain")
    parser.add_argument("--commands", default="1000,10000", help="--cli: project sizes")
    parser.add_argument("--rounds", type=int, default=5, help="--cli: interleaved rounds")
    parser.add_argument("--no-json", action="store_true", help="--cli: leave out --json")
    parser.add_argument(
        "--fdl",
        action="append",
        help="--cli: [LABEL=]console script, repeatable to compare builds in the same "
        "interleaved rounds (default: this venv's fdl)",
    )
    args = parser.parse_args()
    if args.cli:
        cli_main(args)
        return
    rows = []
    first: tuple[int, float] | None = None
    for size in (int(s) for s in args.sizes.split(",")):
        leaves, load, show, explain, total = measure(size)
        if first is None:
            first = (leaves, total)
        per_leaf_us = total / leaves * 1e6
        rows.append(
            (
                f"{leaves:,}",
                f"{load * 1000:.0f}",
                f"{show * 1000:.0f}",
                f"{explain * 1000:.0f}",
                f"{total * 1000:.0f}",
                f"{per_leaf_us:.1f}",
            )
        )
    print("4 layers: inherited + base + overlay (10% overridden) + env vars")
    print_table(
        ["leaves", "load+merge+validate ms", "show ms", "explain ms", "total ms", "us/leaf"], rows
    )


if __name__ == "__main__":
    main()
