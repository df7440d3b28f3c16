"""``python -m fdl.refresh [discover]|toolkits|wheels|buildenv``: see :mod:`fdl.refresh`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    from fdl.compat import toolkits
    from fdl.errors import FdlError
    from fdl.refresh import derive_toolkit, drift
    from fdl.runner import default_runner

    parser = argparse.ArgumentParser(prog="python -m fdl.refresh")
    sub = parser.add_subparsers(dest="what")
    discover = sub.add_parser(
        "discover",
        help="the default: what PyPI has that the tables lack, as a diff of the tables",
    )
    _discover_options(discover)
    kits = sub.add_parser("toolkits", help="CUDA toolkits: archs and host compilers")
    kits.add_argument("versions", nargs="*", help="toolkits (default: every one in cuda.yaml)")
    kits.add_argument("--json", action="store_true", help="print the drift as JSON")
    wheels = sub.add_parser("wheels", help="torch wheels on PyPI: CUDA and cuDNN pins")
    wheels.add_argument("versions", nargs="+", help="torch releases, e.g. 2.14.1 2.15.0")
    wheels.add_argument("--json", action="store_true", help="print the facts as JSON")
    wheels.add_argument(
        "--metadata-only",
        action="store_true",
        help="skip streaming libtorch_cuda.so for its archs and PTX (about 360 MB a wheel)",
    )
    learn = sub.add_parser(
        "learn",
        help="read a torch release newer than the tables from its wheels on PyPI into fdl's cache",
    )
    learn.add_argument("version", help="a torch release, e.g. 2.16 or 2.16.0")
    learn.add_argument("--json", action="store_true", help="print the facts as JSON")
    learn.add_argument(
        "--metadata-only",
        action="store_true",
        help="do not stream its libtorch_cuda.so for the archs (about 360 MB)",
    )
    learn.add_argument("--pypi", default=None, help="PyPI's JSON API (https://pypi.org/pypi)")
    honoured = sub.add_parser(
        "buildenv", help="where a PyTorch tree honours each input of a build plan"
    )
    honoured.add_argument("plan", help="a plan: fdl libtorch build --dry-run --json > plan.json")
    honoured.add_argument("--source", required=True, help="the PyTorch source tree")
    honoured.add_argument("--json", action="store_true", help="print the rows as JSON")
    _discover_options(parser)
    args = parser.parse_args(argv)
    if args.what in (None, "discover"):
        return _discover(args)
    if args.what == "learn":
        return _learn(args)
    if args.what == "buildenv":
        return _buildenv(args.plan, args.source, as_json=args.json)
    if args.what == "wheels":
        return _wheels(args.versions, as_json=args.json, device_code=not args.metadata_only)
    versions = args.versions or [t.version for t in toolkits()]
    runner = default_runner()
    report: list[dict[str, object]] = []
    drifted = False
    for version in versions:
        try:
            derived = derive_toolkit(version, runner, sys.executable)
        except FdlError as exc:
            report.append({"toolkit": version, "error": exc.message})
            print(f"{version}: cannot refresh: {exc.message}", file=sys.stderr)
            drifted = True
            continue
        found = drift(derived)
        drifted = drifted or bool(found)
        report.append(
            {
                "toolkit": version,
                "wheel": derived.wheel,
                "ptxas": derived.ptxas_version,
                "archs": derived.archs,
                "compilers": derived.compilers,
                "drift": [d.to_json() for d in found],
            }
        )
        if not args.json:
            state = "matches the table" if not found else f"{len(found)} difference(s)"
            print(f"{version} ({derived.wheel}, ptxas {derived.ptxas_version}): {state}")
            for item in found:
                print(
                    f"  {item.fact}: table {item.table!r}, artefact {item.artefact!r} ({item.source})"
                )
    if args.json:
        print(json.dumps(report, indent=2))
    return 1 if drifted else 0


def _discover_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write", action="store_true", help="apply the diff to fdl/data/compat (for review)"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--metadata-only",
        action="store_true",
        help="do not stream a new release's libtorch_cuda.so for its archs (about 360 MB)",
    )
    parser.add_argument(
        "--no-toolkit-wheels",
        action="store_true",
        help="report a new CUDA toolkit without downloading its nvcc wheel",
    )
    parser.add_argument("--pypi", default=None, help="PyPI's JSON API (https://pypi.org/pypi)")
    parser.add_argument(
        "--crates-index",
        default=None,
        help="Rust's sparse registry index, for new floDl and tch releases "
        "(https://index.crates.io)",
    )
    parser.add_argument(
        "--no-crates", action="store_true", help="do not look for new floDl and tch releases"
    )


def _crates(args: argparse.Namespace, tables: Any, today: str) -> tuple[Any, int]:
    """New floDl and tch releases on Rust's registry, as rows of frameworks.yaml: (the
    refresh or None, the exit code of a failure or 0)."""
    from fdl.errors import FdlError
    from fdl.net import read_range
    from fdl.refresh._crates import INDEX, refresh_frameworks

    if args.no_crates:
        return None, 0
    index = args.crates_index or INDEX
    try:
        text = (tables / "frameworks.yaml").read_text(encoding="utf-8")
        return refresh_frameworks(read_range, text, index=index, today=today), 0
    except FdlError as exc:
        print(f"cannot read floDl and tch releases from {index}: {exc.message}", file=sys.stderr)
        return None, exc.exit_code
    except OSError as exc:
        print(f"cannot read frameworks.yaml: {exc}", file=sys.stderr)
        return None, 1


def _discover(args: argparse.Namespace) -> int:
    """Compare the tables with PyPI; print the findings and the diff; exit 1 on drift."""
    import datetime

    from fdl._assets import data_dir
    from fdl.errors import FdlError
    from fdl.net import read_range
    from fdl.refresh import derive_toolkit
    from fdl.refresh._discover import PYPI, refresh_tables
    from fdl.runner import default_runner

    tables = data_dir() / "compat"
    runner = default_runner()
    try:
        refreshed = refresh_tables(
            read_range,
            tables,
            pypi=(args.pypi or PYPI).rstrip("/"),
            today=datetime.date.today().isoformat(),
            device_code=not args.metadata_only,
            derive=None
            if args.no_toolkit_wheels
            else (lambda version: derive_toolkit(version, runner, sys.executable)),
        )
    except FdlError as exc:
        print(f"cannot refresh the tables from PyPI: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  fix: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    from fdl.refresh._patch import unified_diff

    today = datetime.date.today().isoformat()
    crates, crates_failed = _crates(args, tables, today)
    diff = refreshed.diff()
    if crates is not None and crates.after != crates.before:
        diff += unified_diff("frameworks.yaml", crates.before, crates.after)
    if args.json:
        report = {
            "findings": [f.to_json() for f in refreshed.findings],
            "frameworks": [f.to_json() for f in crates.findings] if crates else None,
            "diff": diff,
            "bytes_read": refreshed.bytes_read + (crates.bytes_read if crates else 0),
            "seconds": refreshed.seconds,
        }
        print(json.dumps(report, indent=2))
    else:
        state = f"{len(refreshed.findings)} finding(s)" if refreshed.findings else "no drift"
        print(
            f"fdl's tables against PyPI: {state} "
            f"({refreshed.bytes_read / 1e6:.1f} MB read in {refreshed.seconds} s)"
        )
        for item in refreshed.findings:
            mark = "" if item.changed else " (reported, not changed)"
            print(
                f"- {item.table} {item.subject} {item.fact}: table {item.table_value!r}, "
                f"PyPI {item.found!r}{mark}; source: {item.source}"
            )
        for new in crates.findings if crates else []:
            if new.error:
                print(f"- frameworks.yaml {new.framework} {new.version}: not read: {new.error}")
            else:
                print(
                    f"- frameworks.yaml {new.framework} {new.version}: torch {new.torch}, "
                    f"C++{new.cxx_standard}; source: {new.source}"
                )
        if diff:
            print()
            print(diff, end="")
    if args.write:
        for name, (before, after) in refreshed.texts.items():
            if before != after:
                (tables / name).write_text(after)
        if crates is not None and crates.after != crates.before:
            (tables / "frameworks.yaml").write_text(crates.after, encoding="utf-8")
    if crates_failed:
        return crates_failed
    # a checked image tag with a newer patch is a note; anything else is drift to review
    drifted = [f for f in refreshed.findings if f.changed or f.fact != "image.version"]
    return 1 if drifted or (crates is not None and crates.findings) else 0


def _learn(args: argparse.Namespace) -> int:
    """Read a release newer than the tables from its wheels on PyPI and keep its facts in
    fdl's cache, where the planners find them, labelled as read from artefacts."""
    import datetime

    from fdl.compat import release, releases, version_key
    from fdl.errors import FdlError, NetworkError, UsageError
    from fdl.net import read_range
    from fdl.refresh._learn import learn_release
    from fdl.refresh._release import PYPI

    version = str(args.version)
    try:
        key = version_key(version)
    except ValueError:
        key = ()
    if len(key) < 2:
        print(f"{version!r} is not a torch release (e.g. 2.16 or 2.16.0)", file=sys.stderr)
        return 2
    newest = releases()[-1]
    if key[:2] <= version_key(newest.version)[:2]:
        try:
            known = release(version)
        except UsageError as exc:
            print(f"{exc.message}", file=sys.stderr)
            return 2
        print(
            f"torch {version} is in fdl's reviewed tables (torch {known.version}): nothing to read"
        )
        return 0
    try:
        learned = learn_release(
            version,
            read_range,
            today=datetime.date.today().isoformat(),
            pypi=args.pypi or PYPI,
            device_code=not args.metadata_only,
        )
    except NetworkError as exc:
        print(f"cannot read torch {version} from PyPI: {exc.message}", file=sys.stderr)
        print(
            f"  fdl's tables end at {newest.latest}; without its facts, torch {version} "
            "stays refused",
            file=sys.stderr,
        )
        return exc.exit_code
    except FdlError as exc:
        print(exc.message, file=sys.stderr)
        if exc.hint:
            print(f"  fix: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    entry, path = learned.entry, learned.path
    if args.json:
        print(
            json.dumps(
                {
                    **entry,
                    "cache": str(path),
                    "bytes_read": learned.bytes_read,
                    "seconds": learned.seconds,
                },
                indent=2,
            )
        )
        return 0
    kept = release(version)
    default = next(v for v in kept.variants if v.default)
    archs = "not read" if default.archs_unread else default.targets.torch_cuda_arch_list() or "none"
    print(f"{kept.provenance}.")
    print(
        f"  torch {', '.join(kept.patches)}: {default.name} (CUDA {default.cuda or 'none'}, "
        f"cuDNN {default.cudnn or 'none'}), archs {archs}, "
        f"Python >= {kept.source.python_min}"
    )
    for note in entry["notes"]:
        print(f"  {note}")
    print(f"  kept in {path} ({learned.bytes_read / 1e6:.1f} MB read in {learned.seconds} s)")
    return 0


def _wheels(versions: list[str], *, as_json: bool, device_code: bool = True) -> int:
    """Read each release's wheels' METADATA through HTTP Range requests and compare."""
    from fdl.errors import FdlError
    from fdl.net import read_range
    from fdl.refresh._wheel_code import wheel_code_report
    from fdl.refresh._wheels import PYPI_JSON, cuda_facts, pypi_wheels, wheel_drift, wheel_metadata

    try:
        raw, _ = read_range(PYPI_JSON, 0, None)
    except FdlError as exc:
        print(f"cannot read {PYPI_JSON}: {exc.message}", file=sys.stderr)
        return 1
    from fdl.net import read_json

    project = read_json(raw)  # None: malformed, or nested deeper than the parser goes
    if not isinstance(project, dict):
        print(f"{PYPI_JSON} is not PyPI's JSON for torch", file=sys.stderr)
        return 1
    report: list[dict[str, object]] = []
    drifted = False
    for version in versions:
        urls = pypi_wheels(project, version)
        if not urls:
            print(f"{version}: no CPython manylinux wheel on PyPI", file=sys.stderr)
            drifted = True
            continue
        for platform, url in sorted(urls.items()):
            try:
                facts = cuda_facts(wheel_metadata(url, read_range), platform.removeprefix("linux-"))
            except FdlError as exc:
                print(f"{version} {platform}: {exc.message}", file=sys.stderr)
                drifted = True
                continue
            found = wheel_drift(version, platform, facts)
            entry: dict[str, object] = {
                "torch": version,
                "platform": platform,
                "cuda": facts.cuda,
                "cudnn": facts.cudnn,
                "pins": facts.pins,
            }
            if device_code:
                try:
                    entry["device_code"], code_found = wheel_code_report(version, platform, url)
                except FdlError as exc:
                    print(f"{version} {platform}: {exc.message}", file=sys.stderr)
                    drifted = True
                    code_found = []
                found += code_found
            entry["drift"] = found
            drifted = drifted or bool(found)
            report.append(entry)
            if not as_json:
                state = "matches the table" if not found else f"{len(found)} difference(s)"
                print(f"{version} {platform}: CUDA {facts.cuda}, cuDNN {facts.cudnn}: {state}")
                shown = entry.get("device_code")
                if isinstance(shown, dict):
                    print(f"  {shown['summary']}")
                for item in found:
                    print(
                        f"  {item['fact']}: table {item['table']!r}, artefact {item['artefact']!r}"
                    )
    if as_json:
        print(json.dumps(report, indent=2))
    return 1 if drifted else 0


def _buildenv(plan_file: str, source: str, *, as_json: bool) -> int:
    """Print where ``source`` acts on each variable, file, submodule and download of the
    plan and what each row checked; exit 1 when one is honoured nowhere, missing, or has a
    value the tree refuses."""
    from pathlib import Path

    from fdl.refresh._honoured import TREE_FILES, honoured_table, where_honoured

    try:
        plan = json.loads(Path(plan_file).read_text())
        env = dict(plan["env"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"{plan_file}: not a build plan ({exc})", file=sys.stderr)
        print("  fix: fdl libtorch build ... --dry-run --json > plan.json", file=sys.stderr)
        return 2
    tree = Path(source)
    if not (tree / "tools" / "build_libtorch.py").is_file():
        print(f"{source}: not a PyTorch source tree (no tools/build_libtorch.py)", file=sys.stderr)
        return 2
    rows = where_honoured(tree, {str(k): str(v) for k, v in env.items()}, TREE_FILES, plan=plan)
    if as_json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
    else:
        print(honoured_table(rows, env))
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
