"""Helpers for the task-runner tests: projects on disk, argv printers, golden files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden" / "tasks"

# Prints what it received as JSON: argv, working directory and selected variables.
PRINT_ARGV = """\
import json, os, sys
keys = [
    "LIBTORCH", "LIBTORCH_PATH", "LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH", "Torch_DIR",
    "CUDA_VERSION", "CUDA_TAG", "FDL_PROJECT_ROOT", "FDL_ENV",
]
print(json.dumps({
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "env": {k: os.environ[k] for k in keys if k in os.environ},
}))
"""

ADVERSARIAL = [
    "plain",
    "",
    "two words",
    "it's",
    'say "hi"',
    "$HOME",
    "${PATH}",
    "`id`",
    "$(id)",
    "a;b",
    "a && b",
    "line1\nline2",
    "*",
    "?.py",
    "[ab]",
    "~",
    "-n",
    "--flag=value",
    "-",
    "--",
    "back\\slash",
    "tab\there",
    "!bang",
    "#hash",
    "über",
    "'",
    '"',
    "'\\''",
    "a=b",
    "%s",
    "{a,b}",
    ">out",
    "|",
]


def write(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text, dedented) under ``root``; return ``root``."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def fake_libtorch(root: Path, name: str = "precompiled/cu128", cuda: str | None = "12.8") -> Path:
    """An installed (empty) libtorch variant, made active."""
    variant = root / "libtorch" / name
    (variant / "lib").mkdir(parents=True, exist_ok=True)
    # as floDl's CLI writes it: a ROCm build lists gfx targets, a CPU build "cpu"
    base = name.rsplit("/", 1)[-1]
    archs = "gfx908 gfx90a" if base.startswith("rocm") else "7.0 8.0" if cuda else "cpu"
    arch = f"cuda={cuda or 'none'}\ntorch=2.10.0\narchs={archs}\nsource=precompiled\n"
    (variant / ".arch").write_text(arch, encoding="utf-8")
    (root / "libtorch" / ".active").write_text(name + "\n", encoding="utf-8")
    return variant


def last_json(text: str) -> Any:
    """The last line of ``text`` that is a JSON object."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output:\n{text}")


def normalize(text: str, *roots: Path) -> str:
    """Replace machine-specific paths by stable placeholders (for golden files)."""
    for index, root in enumerate(roots):
        label = "<project>" if index == 0 else f"<dir{index}>"
        text = text.replace(str(root.resolve()), label).replace(str(root), label)
    return text


def assert_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with ``tests/golden/tasks/<name>``; FDL_UPDATE_GOLDEN=1 rewrites it."""
    from tests.support.golden import assert_golden as check

    check(f"tasks/{name}", actual)
