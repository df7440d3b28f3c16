#!/usr/bin/env python3
"""Run the command lines floDl's documentation gives for its own repository against fdl.

    python scripts/flodl-doc-lines.py GIT_DIR [--tag 0.5.3] [--fdl fdl] [--keep DIR]

GIT_DIR is a clone (or a bare mirror) of github.com/flodl-labs/flodl. The tag is unpacked
into a temporary directory (blobs the clone lacks, such as LFS files, are left out), its
`fdl.yml.example` files are copied to `fdl.yml` as floDl's CLI offers to on first use, and
`fdl.ci.yml` is the CI overlay of docs/cli.md. Each `fdl ...` line of the files below runs
there: project commands with `--dry-run` (nothing is built or started), built-ins as
written. Lines with placeholders (`<name>`, `...`) and machine-level built-ins (setup,
libtorch, init, add, install, api-ref, skill, diagnose) are not this repository's and are
left out. A line passes when fdl exits 0, or with the error the documentation shows.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = [
    "README.md",
    "CONTRIBUTING.md",
    "flodl-hf/README.md",
    "benchmarks/README.md",
    "ddp-bench/README.md",
    "docs/cli.md",
    "docs/tutorials/14-flodl-hf.md",
    "fdl.yml.example",
    "flodl-hf/fdl.yml.example",
    "flodl-hf/parity/fdl.yml.example",
    "flodl-hf/verify-matrix/fdl.yml.example",
    "benchmarks/fdl.yml.example",
    "ddp-bench/fdl.yml.example",
    "flodl-cli/README.md",
]
LINE = re.compile(r"(?:^|`|\$ |^[ \t]+)((?:cd [^ `]+ && )?fdl [a-z@-][^`#|\n]*)", re.MULTILINE)
PLACEHOLDER = re.compile(r"[<>…]|\.\.\.|\[env\]|\\$|/ info|list/clear|\s>\s")
MACHINE = {
    "setup",
    "libtorch",
    "init",
    "add",
    "install",
    "api-ref",
    "skill",
    "autocomplete",
    "diagnose",
}
BUILTIN_AS_WRITTEN = {"config", "schema", "completions", "version"}
EXPECTED_ERROR = {"fdl test-live -p flodl-hf": 2}  # docs/cli.md documents the refusal
NOT_THIS_REPO = {
    "fdl train --help": "docs/cli.md's example of a user project with a `train` command",
    "fdl train ./data/train.bin --epochs 50": "docs/cli.md's example of a user project",
    "fdl flodl-hf classify": "the HF playground that `fdl init --with-hf` scaffolds",
    "fdl ddp-bench --refresh-schema": "builds the cuda image and runs cargo in it (not a dry run)",
}
CI_OVERLAY = "# fdl.ci.yml -- CI overlay (docs/cli.md)\ncommands:\n  test:\n    append: -- --nocapture --test-threads=1\n"


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=True
    ).stdout


def unpack(git_dir: Path, tag: str, into: Path) -> None:
    listing = git(git_dir, "ls-tree", "-r", tag)
    missing = []
    for row in listing.splitlines():
        meta, path = row.split("\t", 1)
        sha = meta.split()[2]
        if subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", sha]).returncode:
            missing.append(f":(exclude){path}")
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", tag, "--", ".", *missing],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for example in into.rglob("fdl.yml.example"):
        if "flodl-cli" not in example.parts:
            shutil.copyfile(example, example.with_name("fdl.yml"))
    (into / "fdl.ci.yml").write_text(CI_OVERLAY)


def lines(git_dir: Path, tag: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for doc in DOCS:
        text = git(git_dir, "show", f"{tag}:{doc}")
        for match in LINE.finditer(text):
            found.setdefault(match.group(1).strip(), doc)
    return found


def run(fdl: list[str], tree: Path, line: str) -> tuple[object, list[str], str]:
    words = shlex.split(line)[1:]
    index = 0
    while index < len(words) and words[index][:1] in "-@":
        index += 2 if words[index] in ("--env", "-e") else 1
    command = words[index] if index < len(words) else None
    if command in MACHINE:
        return "skipped", [], "a machine-level built-in"
    args = list(words)
    as_written = (
        "config" in words
        or command in BUILTIN_AS_WRITTEN
        or (
            command == "bench"
            and words[index + 1 : index + 2] in (["run"], ["report"], ["compare"])
        )
    )
    if command is not None and not as_written and not {"--help", "-h"} & set(args):
        args.insert(args.index("--") if "--" in args else len(args), "--dry-run")
    env = dict(os.environ, NO_COLOR="1", FDL_IN_CONTAINER="0", FDL_HOME=str(tree / ".fdl-home"))

    def once(argv: list[str]) -> tuple[object, list[str]]:
        try:
            done = subprocess.run(
                [*fdl, *argv], cwd=tree, env=env, capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            return "timeout", []
        return done.returncode, done.stderr.strip().splitlines()

    code, err = once(args)
    if code == 2 and "--dry-run" in args and any("is a group of commands" in e for e in err):
        args.remove("--dry-run")  # `fdl flodl-hf` lists its commands: nothing to dry-run
        code, err = once(args)
    if EXPECTED_ERROR.get(line) == code:
        code = 0
    return code, err, " ".join(args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("--tag", default="0.5.3")
    parser.add_argument("--fdl", default="fdl", help="the fdl command (split like a shell)")
    parser.add_argument("--keep", type=Path, help="unpack here and keep it")
    options = parser.parse_args()
    tree = options.keep or Path(tempfile.mkdtemp(prefix="flodl-"))
    tree.mkdir(parents=True, exist_ok=True)
    unpack(options.git_dir, options.tag, tree)
    checked = skipped = passed = 0
    for line, doc in sorted(lines(options.git_dir, options.tag).items()):
        if PLACEHOLDER.search(line) or line.startswith("cd "):
            continue
        if line in NOT_THIS_REPO:
            print(f"{'skipped':>7}  {line}  [{doc}]  {NOT_THIS_REPO[line]}")
            skipped += 1
            continue
        code, err, ran = run(shlex.split(options.fdl), tree, line)
        if code == "skipped":
            continue
        checked += 1
        passed += code == 0
        print(
            f"{code!s:>7}  {line}  [{doc}]" + (f"  {err[0][:150] if err else ''}" if code else "")
        )
    print(
        f"\n{passed} of {checked} documented command lines work ({skipped} left out: not this repository, or not a dry run)"
    )
    if options.keep is None:
        shutil.rmtree(tree, ignore_errors=True)
    return 0 if passed == checked else 1


if __name__ == "__main__":
    sys.exit(main())
