"""The lazy packages' export tables, generated from their modules' ``__all__``.

A lazy package (:mod:`fdl._lazy`) keeps its public names in ``__all__`` (written by hand:
what it promises) and, between the markers :data:`BEGIN` and :data:`END`, a generated section: the imports its type
checker reads and ``_HOMES``, the module each name is imported from on first use. The home
of a name is the child module (or subpackage) whose ``__all__`` lists it; where several do,
the one that defines it. Nothing is imported: the modules are read as text (start-up pays
nothing; the tables are data in the package).

Run ``python -m fdl._lazy_tables --write`` after changing an ``__all__``; ``--check``
(the default) exits 1 where a table is stale. ``tests/unit/test_lazy_tables.py`` runs it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BEGIN",
    "END",
    "TableError",
    "generated_section",
    "homes",
    "lazy_packages",
    "main",
    "refresh",
]

BEGIN = "# <lazy-exports>"
END = "# </lazy-exports>"
_BEGIN_LINE = f"{BEGIN} generated from the modules' __all__ by `python -m fdl._lazy_tables --write`"
_LINE_LENGTH = 100
_ROOT = Path(__file__).resolve().parent


class TableError(Exception):
    """A name of a package's ``__all__`` that no child module exports, or exports twice."""


@dataclass(frozen=True)
class _Module:
    """What the generator reads of one module: its ``__all__`` and what it binds itself."""

    exports: tuple[str, ...]
    defines: frozenset[str]
    binds: frozenset[str]


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _read(path: Path) -> _Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    exports: tuple[str, ...] = ()
    defines: set[str] = set()
    imports: set[str] = set()
    for node in tree.body:
        if _is_type_checking(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defines.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defines.add(target.id)
                    if target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        exports = tuple(
                            e.value
                            for e in node.value.elts
                            if isinstance(e, ast.Constant) and isinstance(e.value, str)
                        )
    return _Module(exports, frozenset(defines), frozenset(defines | imports))


def _dotted(package: Path) -> str:
    """``fdl.libtorch.sources`` for its directory: up while the parent is a package."""
    parts = [package.name]
    while (package.parent / "__init__.py").is_file():
        package = package.parent
        parts.append(package.name)
    return ".".join(reversed(parts))


def _children(package: Path) -> dict[str, Path]:
    """The package's child modules and subpackages, by name."""
    found = {p.stem: p for p in package.glob("*.py") if p.name != "__init__.py"}
    found.update({p.parent.name: p for p in package.glob("*/__init__.py")})
    return found


def homes(package: Path) -> dict[str, str]:
    """Each name of ``package``'s ``__all__`` that the package does not bind itself (nor is
    a child module) -> the child whose ``__all__`` lists it.

    Raises:
        TableError: no child exports a name, or several do and not one of them defines it.
    """
    package = package.resolve()
    own = _read(package / "__init__.py")
    children = _children(package)
    read = {name: _read(path) for name, path in sorted(children.items())}
    found: dict[str, str] = {}
    for name in own.exports:
        if name in own.binds or name in children:
            continue
        offers = [child for child, module in read.items() if name in module.exports]
        if len(offers) > 1:
            offers = [child for child in offers if name in read[child].defines]
        if len(offers) != 1:
            where = ", ".join(offers) if offers else "none of its modules"
            raise TableError(
                f"{_dotted(package)}: {name!r} is exported by {where}"
                " (add it to the __all__ of the module that defines it)"
            )
        found[name] = offers[0]
    return found


def _member_key(name: str) -> tuple[int, str]:
    """isort's order inside one import (constants, classes, then the rest), as ruff sorts."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def _import(module: str, names: list[str]) -> list[str]:
    ordered = sorted(names, key=_member_key)
    line = f"    from {module} import {', '.join(ordered)}"
    if len(line) <= _LINE_LENGTH:
        return [line]
    return [f"    from {module} import (", *(f"        {n}," for n in ordered), "    )"]


def generated_section(package: Path) -> str:
    """The text between the markers (both included) for ``package``."""
    package = package.resolve()
    table = homes(package)
    dotted = _dotted(package)
    by_home: dict[str, list[str]] = {}
    for name, home in table.items():
        by_home.setdefault(home, []).append(name)
    lines = [_BEGIN_LINE, "if TYPE_CHECKING:"]
    for home in sorted(by_home):
        lines += _import(f"{dotted}.{home}", by_home[home])
    lines.append("_HOMES = {")
    for home in sorted(by_home):
        lines += [f'    "{n}": "{home}",' for n in sorted(by_home[home], key=_member_key)]
    lines += ["}", END]
    return "\n".join(lines) + "\n"


def lazy_packages(root: Path = _ROOT) -> list[Path]:
    """The packages under ``root`` that hold a generated section."""
    return sorted(
        p.parent for p in root.rglob("__init__.py") if BEGIN in p.read_text(encoding="utf-8")
    )


def refresh(package: Path, *, write: bool) -> bool:
    """True when ``package``'s section is current; with ``write``, make it so."""
    init = package / "__init__.py"
    text = init.read_text(encoding="utf-8")
    start = text.find(BEGIN)
    stop = text.find(END, start) if start >= 0 else -1
    if stop < 0:
        raise TableError(f"{_dotted(package)}: no {BEGIN} ... {END} section")
    stop += len(END) + 1
    fresh = text[:start] + generated_section(package) + text[stop:]
    if fresh == text:
        return True
    if write:
        init.write_text(fresh, encoding="utf-8")
    return False


def main(argv: list[str]) -> int:
    """``--write`` rewrites the stale sections; ``--check`` (default) names them, exit 1."""
    write = "--write" in argv
    code = 0
    for package in lazy_packages():
        try:
            current = refresh(package, write=write)
        except TableError as error:
            print(f"error: {error}", file=sys.stderr)
            code = 1
            continue
        if not current:
            said = "rewrote" if write else "stale (run `python -m fdl._lazy_tables --write`)"
            print(f"{_dotted(package)}: {said}")
            code = code or int(not write)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
