"""Where a PyTorch source tree honours what a build plan relies on: for each variable the
plan sets, each file of the tree it runs or reads, the tree's submodules and what its
configure downloads, the file and line of the tree that acts on it and what was checked
(``python -m fdl.refresh buildenv PLAN.json --source TREE``).

A plan is only as good as the tree's agreement with it: a variable no line of the tree
reads does nothing, and a value the tree's grammar refuses fails the build. The search is
textual, in the places PyTorch's build reads its inputs (its Python build tools,
``setup.py``, its CMake files; never ``third_party/``), the line that acts first:

1. an environment read in the Python build tools (``os.getenv("MAX_JOBS")`` in
   ``tools/setup_helpers/cmake.py``'s ``build()``: that is where the parallelism is
   decided; a CMake file of a dependency that also reads it, such as ``nccl.cmake``, is not
   the line that acts), named with its enclosing function;
2. an environment read in CMake (``$ENV{NAME}``);
3. the CMake option or variable (``option(NAME``, ``${NAME}``, ``if(NAME``);
4. for ``BUILD_``/``USE_``/``CMAKE_`` names without any: the line of the build tools that
   passes every such variable to CMake.

Values are checked where the tree has a grammar for them: ``TORCH_CUDA_ARCH_LIST`` against
the arch patterns of the tree's own arch selection (``select_compute_arch.cmake``:
``12.0f`` is refused by a tree whose pattern takes only ``a``), a CMake option's value as a
CMake boolean, ``MAX_JOBS`` as a count, ``CMAKE_BUILD_TYPE`` as one of CMake's types.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fdl.compat import load_table, version_key

__all__ = ["TREE_FILES", "Honoured", "honoured_table", "where_honoured"]

# Files of the tree a plan runs or reads (fdl.libtorch.build's checks and scripts).
TREE_FILES = (
    "tools/build_libtorch.py",
    "version.txt",
    "requirements-build.txt",
    "requirements.txt",
    "tools/optional_submodules.py",
    ".gitmodules",
)
# Without these no plan builds the tree; the others are read when there (the plan reads
# the first requirements file it finds; older trees have no optional_submodules.py).
_REQUIRED_FILES = ("tools/build_libtorch.py", "version.txt")

# Variables the plan sets for a program other than the tree's files: never "not honoured".
_OUTSIDE = {
    "CCACHE_": "ccache",
    "SCCACHE_": "sccache",
    "CUDACXX": "CMake (the CUDA compiler of enable_language(CUDA)), set by fdl",
}
# Set by fdl for the trees that read them: reported, not failed, when this one does not.
_FDL_SETS = {"CUDA_HOME": "the toolkit fdl probed (find_cuda_home)"}
_PASSED_PREFIXES = ("BUILD_", "USE_", "CMAKE_")
_PREFIX_RULE = re.compile(r"""["'](BUILD_|USE_|CMAKE_)["'].*["'](BUILD_|USE_|CMAKE_)["']""")
_SKIP = {"third_party", ".git", "build", "test", "benchmarks", "docs"}
_BOOLEAN = {"0", "1", "ON", "OFF", "TRUE", "FALSE", "YES", "NO", "Y", "N"}
_BUILD_TYPES = ("Release", "Debug", "RelWithDebInfo", "MinSizeRel")
_UNKNOWN_ARCH = "Unknown CUDA Architecture Name"


@dataclass(frozen=True)
class Honoured:
    """Where the tree honours one input of the plan, and what was checked.

    Attributes:
        name: The variable, the tree's file, ``submodules`` or ``download: ...``.
        kind: ``variable``, ``file``, ``submodules`` or ``download``.
        where: ``path:line`` in the tree, None when nothing there acts on it.
        text: That line (stripped, at most 120 characters), or why nothing is shown.
        how: ``reads the environment``, ``CMake option``, ``passed to CMake by the prefix
            rule``, ``runs it``/``reads it`` (files), a tool's name, ``not honoured``,
            ``missing``, ``value refused``.
        checked: What this row checked, in words (the value, the grammar, the files).
        ok: False when the build would not do what the plan says.
    """

    name: str
    kind: str
    where: str | None
    text: str
    how: str
    checked: str = ""
    ok: bool = True

    def to_json(self) -> dict[str, object]:
        return asdict(self)


Line = tuple[str, int, str]


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


def _lines(files: Iterable[Path], tree: Path) -> list[Line]:
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


def _first(lines: list[Line], pattern: re.Pattern[str]) -> Line | None:
    for item in lines:
        if pattern.search(item[2]) and not item[2].lstrip().startswith("#"):
            return item
    return None


def _function_of(lines: list[Line], hit: Line) -> str | None:
    """The Python function a line is in (the nearest ``def`` above it, same file)."""
    relative = hit[0]
    index = lines.index(hit)
    for other, _n, text in reversed(lines[:index]):
        if other != relative:
            break
        match = re.match(r"\s*(?:async\s+)?def\s+(\w+)", text)
        if match:
            return match.group(1)
    return None


def _at(hit: Line) -> tuple[str, str]:
    return f"{hit[0]}:{hit[1]}", hit[2].strip()[:120]


# --- values --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ArchGrammar:
    """The arch patterns and names of the tree's arch selection file."""

    where: str  # the line that refuses an unknown entry
    patterns: tuple[re.Pattern[str], ...]
    names: frozenset[str]


def _arch_grammar(cmake: list[Line]) -> _ArchGrammar | None:
    """The numeric patterns (``if(name MATCHES "^([0-9]+)\\.([0-9])(a?)$")``) and the
    family names (``STREQUAL "Pascal"``) of the file that refuses an unknown arch name."""
    refusal = _first(cmake, re.compile(re.escape(_UNKNOWN_ARCH)))
    if refusal is None:
        return None
    body = [item for item in cmake if item[0] == refusal[0]]
    patterns: list[re.Pattern[str]] = []
    names: set[str] = set()
    for _, _, text in body:
        for raw in re.findall(r'MATCHES\s+"([^"]*\[0-9\][^"]*)"', text):
            regex = raw.replace("\\\\", "\\")
            if "PTX" in regex:
                continue
            try:
                patterns.append(re.compile(regex))
            except re.error:
                continue
        names.update(re.findall(r'STREQUAL\s+"([A-Za-z][\w+]*)"', text))
    if not patterns:
        return None
    return _ArchGrammar(f"{refusal[0]}:{refusal[1]}", tuple(patterns), frozenset(names))


def _check_arch_list(value: str, grammar: _ArchGrammar | None, torch: str | None) -> str | None:
    """Why the tree refuses an entry of ``value`` (None: every entry is accepted)."""
    entries = [e for e in re.split(r"[;\s]+", value.strip()) if e]
    for entry in entries:
        name = entry[: -len("+PTX")] if entry.endswith("+PTX") else entry
        if grammar is not None:
            full = [p for p in grammar.patterns if p.search(name) and p.pattern.startswith("^")]
            if not (full or name in grammar.names):
                return f"{entry}: no arch pattern of the tree matches it ({grammar.where})"
        elif torch is not None:
            from fdl.compat import build_constraints, parse_archs
            from fdl.errors import UsageError

            try:
                for target in parse_archs(name):
                    why = build_constraints(torch).arch_problem(target)
                    if why is not None:
                        return f"{entry}: {why}"
            except UsageError as exc:  # not an arch, or a release the tables lack
                return f"{entry}: {exc.message}"
    return None


def _check_value(
    name: str, value: str | None, how: str, grammar: _ArchGrammar | None, torch: str | None
) -> tuple[str, str | None]:
    """(what was checked, why the value is refused or None)."""
    if value is None:
        return "where it is read (no value in the plan)", None
    if name == "TORCH_CUDA_ARCH_LIST":
        what = (
            f"each entry against the tree's arch patterns ({grammar.where})"
            if grammar is not None
            else f"each entry against fdl's grammar for torch {torch} (no arch file found)"
            if torch
            else "not checked (no arch grammar in the tree, no torch version)"
        )
        return what, _check_arch_list(value, grammar, torch)
    if name == "MAX_JOBS":
        ok = value.isdigit() and int(value) > 0
        return "a positive count", None if ok else f"{value!r} is not a positive count"
    if name == "CMAKE_BUILD_TYPE":
        ok = value in _BUILD_TYPES
        return "one of CMake's build types", None if ok else f"{value!r} is no build type"
    if how == "CMake option":
        ok = value.upper() in _BOOLEAN
        return "a CMake boolean (an option)", None if ok else f"{value!r} is no CMake boolean"
    return "where it is read (the value is free text)", None


# --- variables -----------------------------------------------------------------------------


def _variable_row(
    name: str,
    value: str | None,
    python: list[Line],
    cmake: list[Line],
    grammar: _ArchGrammar | None,
    torch: str | None,
) -> Honoured:
    tool = next((t for prefix, t in _OUTSIDE.items() if name.startswith(prefix)), None)
    if tool is not None:
        return Honoured(
            name, "variable", None, f"read by {tool}", tool, "that its reader is outside the tree"
        )
    word = re.escape(name)
    # a read, not an assignment (os.environ["X"] = ... sets it for later readers)
    env_read = re.compile(
        rf"""\b(?:\w*getenv|\w*environ\w*(?:\.get)?|\w*env\w*)\s*[\[(]\s*["']{word}["']"""
        rf"""(?!\s*\]\s*=[^=])|["']{word}["']\s+in\s+[\w.]*environ"""
    )
    searches = (
        (python, env_read, "reads the environment"),
        (cmake, re.compile(rf"\$ENV\{{{word}\}}"), "reads the environment"),
        (cmake, re.compile(rf"\b(?:cmake_dependent_)?option\(\s*{word}\b"), "CMake option"),
        (cmake, re.compile(rf"\$\{{{word}\}}|\bif\s*\(\s*(?:NOT\s+)?{word}\b"), "CMake variable"),
    )
    for pool, pattern, found_how in searches:
        hit = _first(pool, pattern)
        if hit is None:
            continue
        where, text = _at(hit)
        function = _function_of(pool, hit) if pool is python else None
        how = f"{found_how} in {function}()" if function else found_how
        checked, refused = _check_value(name, value, how, grammar, torch)
        if refused is not None:
            return Honoured(name, "variable", where, refused, "value refused", checked, False)
        return Honoured(name, "variable", where, text, how, checked)
    rule = _first(python, _PREFIX_RULE) if name.startswith(_PASSED_PREFIXES) else None
    if rule is not None:
        where, text = _at(rule)
        how = "passed to CMake by the prefix rule (CMake's own default applies)"
        checked, refused = _check_value(name, value, how, grammar, torch)
        if refused is not None:
            return Honoured(name, "variable", where, refused, "value refused", checked, False)
        return Honoured(name, "variable", where, text, how, checked)
    if name in _FDL_SETS:
        return Honoured(
            name,
            "variable",
            None,
            f"set by fdl: {_FDL_SETS[name]}; no build file of this tree reads it",
            "fdl's own setting",
            "the tree's build files (none reads it; harmless)",
        )
    return Honoured(
        name,
        "variable",
        None,
        "no build file reads it",
        "not honoured",
        "the tree's build files",
        False,
    )


# --- files, submodules, downloads ----------------------------------------------------------


def _file_row(tree: Path, relative: str, needed: bool, torch: str | None) -> Honoured:
    path = tree / relative
    if not path.is_file():
        if needed:
            return Honoured(
                relative, "file", None, "the tree lacks it", "missing", "that it exists", False
            )
        return Honoured(
            relative,
            "file",
            None,
            "the tree lacks it; the plan does not need it",
            "absent",
            "that it exists (optional)",
        )
    how = "runs it" if relative.endswith(".py") else "reads it"
    text = path.read_text(encoding="utf-8", errors="replace")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    checked = "that it exists"
    if relative == "version.txt" and torch:
        found = re.match(r"\d+\.\d+(\.\d+)?", first)
        tree_version = found.group(0) if found else first
        same = found is not None and version_key(torch)[: len(version_key(tree_version))] == (
            version_key(tree_version)
        )
        checked = f"that it names the plan's torch {torch}"
        if not same:
            return Honoured(
                relative,
                "file",
                f"{relative}:1",
                f"{first[:60]}: the plan is for torch {torch}",
                "value refused",
                checked,
                False,
            )
    if relative == "tools/optional_submodules.py":
        urls = sorted(set(re.findall(r"https?://[^\s\"']+", text)))
        checked = "what the fetch phase clones: " + (", ".join(urls) or "no URL in the file")
    return Honoured(relative, "file", f"{relative}:1", first[:120], how, checked)


def _submodule_row(tree: Path) -> Honoured | None:
    from fdl.libtorch.build import declared_submodules

    if not (tree / ".gitmodules").is_file():
        return None
    declared = declared_submodules(tree)
    missing = [name for name, present in declared if not present]
    checked = f"each of the {len(declared)} submodules .gitmodules declares (nested too) is there"
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        return Honoured(
            "submodules",
            "submodules",
            ".gitmodules:1",
            f"{len(missing)} missing or empty: {shown}",
            "missing",
            checked,
            False,
        )
    return Honoured(
        "submodules", "submodules", ".gitmodules:1", f"{len(declared)} present", "reads it", checked
    )


def _download_rows(tree: Path, env: Mapping[str, str], torch: str | None) -> list[Honoured]:
    """What the configure downloads by itself (build.yaml ``configure_downloads``): off in
    the plan, or where the tree's CMake does it (its third_party/ included)."""
    rows = []
    for entry in load_table("build").get("configure_downloads") or []:
        since = str(entry.get("since_torch", "0"))
        if torch and version_key(torch) < version_key(since):
            continue
        switch = str(entry["switch"])
        name = f"download: {str(entry['downloads']).split(' from ', 1)[0]} ({switch})"
        value = env.get(switch)
        if value is not None and value.upper() in ("0", "OFF", "FALSE", "NO"):
            rows.append(
                Honoured(
                    name,
                    "download",
                    None,
                    f"{switch}={value} in the plan: not downloaded",
                    "switched off",
                    f"that the plan turns {switch} off",
                )
            )
            continue
        hit = _download_line(tree)
        where, text = (None, "no line of this tree downloads it") if hit is None else hit
        rows.append(
            Honoured(
                name,
                "download",
                where,
                text,
                "configure downloads it" if hit else "not in this tree",
                f"{switch} is on: where the configure downloads {entry['downloads']}",
            )
        )
    return rows


def _download_line(tree: Path) -> tuple[str, str] | None:
    """Where NNPACK's CMake configures the download of six (PYTHON_SIX_SOURCE_DIR)."""
    for path in (tree / "third_party" / "NNPACK").glob("**/CMakeLists.txt"):
        lines = _lines([path], tree)
        hit = _first(lines, re.compile(r"DownloadSix|PYTHON_SIX_SOURCE_DIR"))
        if hit is not None:
            return _at(hit)
    return None


# --- all of it -----------------------------------------------------------------------------


def where_honoured(
    tree: Path,
    variables: Iterable[str] | Mapping[str, str],
    files: Iterable[str] = TREE_FILES,
    *,
    plan: Mapping[str, Any] | None = None,
) -> list[Honoured]:
    """For each variable, tree file, the submodules and each configure download, the line
    of ``tree`` that acts on it and what was checked.

    Args:
        tree: A PyTorch source tree (or fdl's fake one).
        variables: The names the plan sets, or its ``env`` (names and values: the values
            are checked against the tree's grammar).
        files: Paths relative to the tree that the plan may run or read; one the tree
            lacks is reported (a failure when the plan needs it).
        plan: The whole plan (its ``torch`` and ``commands`` say which files it needs).
    """
    values: Mapping[str, str] = variables if isinstance(variables, Mapping) else {}
    plan = plan or {}
    torch = str(plan["torch"]) if plan.get("torch") else None
    lines = _lines(_build_files(tree), tree)
    python = [item for item in lines if item[0].endswith(".py")]
    cmake = [item for item in lines if not item[0].endswith(".py")]
    grammar = _arch_grammar(cmake)
    rows = [
        _variable_row(name, values.get(name), python, cmake, grammar, torch)
        for name in sorted(set(variables))
    ]
    named = [  # what the plan's unconditional commands name (a `when` one runs if there)
        str(part)
        for command in plan.get("commands") or ()
        if not command.get("when")
        for part in command.get("argv") or ()
    ]
    for relative in files:
        needed = relative in _REQUIRED_FILES or any(
            part == relative or part.endswith(f"/{relative}") for part in named
        )
        rows.append(_file_row(tree, relative, needed, torch))
    submodules = _submodule_row(tree)
    if submodules is not None:
        rows.append(submodules)
    rows += _download_rows(tree, values, torch)
    return rows


def honoured_table(rows: Iterable[Honoured], values: Mapping[str, str] | None = None) -> str:
    """The rows as a Markdown table (for a closing note or a review)."""
    values = values or {}
    out = [
        "| input | value | where the tree acts on it | line | how | checked |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        value = values.get(row.name, "")
        text = row.text.replace("|", "\\|")
        checked = row.checked.replace("|", "\\|")
        out.append(
            f"| `{row.name}` | {value} | {row.where or '-'} | {text} | {row.how} | {checked} |"
        )
    return "\n".join(out)
