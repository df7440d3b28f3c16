"""Where a PyTorch source tree honours what a build plan relies on: for each variable the
plan sets and each file of the tree it runs or reads, the file and line of the tree that
reads it (``python -m fdl.refresh buildenv PLAN.json --source TREE``).

A plan is only as good as the tree's agreement with it: a variable no line of the tree
reads does nothing. The search is textual, in the places PyTorch's build reads its inputs
(its Python build tools, ``setup.py``, its CMake files; never ``third_party/``), most
specific first:

1. an environment read in CMake (``$ENV{NAME}``) or a Python string ``"NAME"``;
2. the CMake option or variable (``option(NAME``, ``${NAME}``, ``if(NAME``);
3. for ``BUILD_``/``USE_``/``CMAKE_`` names without either: the line of the build tools
   that passes every such variable to CMake.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TREE_FILES", "Honoured", "where_honoured"]

# Files of the tree a plan runs or reads (fdl.libtorch.source's layout check and scripts).
TREE_FILES = (
    "tools/build_libtorch.py",
    "version.txt",
    "requirements-build.txt",
    "requirements.txt",
    "tools/optional_submodules.py",
    ".gitmodules",
)

# Variables read by a tool of the build, not by PyTorch's own files.
_TOOLS = {"CCACHE_": "ccache", "SCCACHE_": "sccache"}
_PASSED_PREFIXES = ("BUILD_", "USE_", "CMAKE_")
_PREFIX_RULE = re.compile(r"""["'](BUILD_|USE_|CMAKE_)["'].*["'](BUILD_|USE_|CMAKE_)["']""")
_SKIP = {"third_party", ".git", "build", "test", "benchmarks", "docs"}


@dataclass(frozen=True)
class Honoured:
    """Where the tree honours one input of the plan.

    Attributes:
        name: The variable or the tree's file.
        kind: ``variable`` or ``file``.
        where: ``path:line`` in the tree, None when nothing honours it.
        text: That line (stripped, at most 120 characters), or why nothing is shown.
        how: ``reads the environment``, ``CMake option``, ``passed to CMake by the prefix
            rule``, ``runs it``/``reads it`` (files), a tool's name, or ``not honoured``.
    """

    name: str
    kind: str
    where: str | None
    text: str
    how: str

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "where": self.where,
            "text": self.text,
            "how": self.how,
        }


def _build_files(tree: Path) -> Iterator[Path]:
    """The tree's build files, Python build tools first, then CMake."""
    for pattern in ("setup.py", "tools/**/*.py"):
        yield from sorted(p for p in tree.glob(pattern) if not _skipped(tree, p))
    yield from sorted(
        p
        for p in tree.rglob("*")
        if (p.name == "CMakeLists.txt" or p.suffix == ".cmake") and not _skipped(tree, p)
    )


def _skipped(tree: Path, path: Path) -> bool:
    parts = path.relative_to(tree).parts
    return bool(set(parts[:-1]) & _SKIP) or not path.is_file()


def _lines(files: Iterable[Path], tree: Path) -> list[tuple[str, int, str]]:
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        relative = path.relative_to(tree).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            found.append((relative, number, line))
    return found


def _first(lines: list[tuple[str, int, str]], pattern: re.Pattern[str]) -> tuple[str, str] | None:
    for relative, number, line in lines:
        if pattern.search(line) and not line.lstrip().startswith("#"):
            return f"{relative}:{number}", line.strip()[:120]
    return None


def where_honoured(tree: Path, variables: Iterable[str], files: Iterable[str]) -> list[Honoured]:
    """For each variable and tree file, the line of ``tree`` that honours it.

    Args:
        tree: A PyTorch source tree (or fdl's fake one).
        variables: The names the plan sets (its ``env``).
        files: Paths relative to the tree that the plan runs or reads (missing ones are
            left out: the plan reads the first requirements file it finds).
    """
    lines = _lines(_build_files(tree), tree)
    python = [item for item in lines if item[0].endswith(".py")]
    cmake = [item for item in lines if not item[0].endswith(".py")]
    rows: list[Honoured] = []
    for name in sorted(set(variables)):
        tool = next((t for prefix, t in _TOOLS.items() if name.startswith(prefix)), None)
        if tool is not None:
            rows.append(Honoured(name, "variable", None, f"read by {tool}", tool))
            continue
        word = re.escape(name)
        searches = (
            (cmake, re.compile(rf"\$ENV\{{{word}\}}"), "reads the environment"),
            (python, re.compile(rf"""["']{word}["']"""), "reads the environment"),
            (cmake, re.compile(rf"\b(?:cmake_dependent_)?option\(\s*{word}\b"), "CMake option"),
            (
                cmake,
                re.compile(rf"\$\{{{word}\}}|\bif\s*\(\s*(?:NOT\s+)?{word}\b"),
                "CMake variable",
            ),
        )
        for pool, pattern, how in searches:
            hit = _first(pool, pattern)
            if hit is not None:
                rows.append(Honoured(name, "variable", hit[0], hit[1], how))
                break
        else:
            rule = _first(python, _PREFIX_RULE) if name.startswith(_PASSED_PREFIXES) else None
            if rule is not None:
                how = "passed to CMake by the prefix rule (CMake's own default applies)"
                rows.append(Honoured(name, "variable", rule[0], rule[1], how))
            else:
                rows.append(
                    Honoured(name, "variable", None, "no build file reads it", "not honoured")
                )
    for relative in files:
        path = tree / relative
        if not path.is_file():
            continue
        how = "runs it" if relative.endswith(".py") else "reads it"
        first = next(
            (
                line.strip()
                for line in path.read_text(errors="replace").splitlines()
                if line.strip()
            ),
            "",
        )
        rows.append(Honoured(relative, "file", f"{relative}:1", first[:120], how))
    return rows


def honoured_table(rows: Iterable[Honoured], values: Mapping[str, str] | None = None) -> str:
    """The rows as a Markdown table (for a closing note or a review)."""
    values = values or {}
    out = ["| input | value | where the tree honours it | line | how |", "|---|---|---|---|---|"]
    for row in rows:
        value = values.get(row.name, "")
        text = row.text.replace("|", "\\|")
        out.append(f"| `{row.name}` | {value} | {row.where or '-'} | {text} | {row.how} |")
    return "\n".join(out)
