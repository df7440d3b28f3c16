"""The shell examples of the manual (docs/**/*.md) and the README: found, with the marker
that says how each runs, and run in a fresh directory (tests/cli/test_docs_examples.py).

An example is a fenced block of ``bash``, ``sh``, ``shell`` or ``console``. The line right
above it may carry a marker, an HTML comment that the rendered page does not show::

    <!-- example: skip="needs a GPU" -->          not run here, with the reason
    <!-- example: exit=2 -->                      the status it ends with (default 0)
    <!-- example: project=cpp -->                 run inside `fdl init demo -t cpp -m native`
    <!-- example: project=flodl mode=mounted -->  the same in another mode
    <!-- example: project=cpp name=my-model -->   the project's directory (default: demo)
    <!-- example: output=full -->                 the output shown is all of it, generated
    <!-- example: rig=mixed driver=570.00 -->     a GTX 1060 beside an RTX 5060 Ti (fake nvidia-smi;
                                                  without rig, an nvidia-smi that lists no GPU)

A ``bash`` block runs as one script (``bash -e``). A ``console`` block holds commands after
``$ `` and, below each, lines the command prints: each shown line must be among the lines it
printed, in order (``...`` stands for any text within a line, a line of ``...`` alone for
lines left out), so an output that changed fails the test with the page and line. With
``output=full`` the shown output is the whole output, written by the test itself
(``FDL_UPDATE_DOCS=1``), never typed: the example's directory is shown as ``~/work``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

SHELL = frozenset({"bash", "sh", "shell", "console"})
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[\w+-]*)")
_MARKER = re.compile(r"^\s*<!--\s*example:(?P<body>.*?)-->\s*$")
_KEYS = frozenset({"skip", "exit", "project", "name", "mode", "rig", "driver", "timeout", "output"})


class MarkerError(ValueError):
    """A marker that cannot be read: unknown key, empty reason, not a number."""


@dataclass(frozen=True)
class Example:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def skip(self) -> str | None:
        return self.options.get("skip")

    @property
    def exit_code(self) -> int:
        return int(self.options.get("exit", "0"))


@dataclass(frozen=True)
class Step:
    """One command of a console block and the lines shown below it."""

    line: int
    command: str
    shown: tuple[str, ...]


def parse_marker(text: str, where: str) -> dict[str, str]:
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise MarkerError(f"{where}: the example marker cannot be read: {err}") from None
    options: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in _KEYS:
            raise MarkerError(
                f"{where}: unknown example marker {word!r} (keys: {', '.join(sorted(_KEYS))})"
            )
        options[key] = value
    if "skip" in options and not options["skip"].strip():
        raise MarkerError(f'{where}: skip needs its reason: skip="needs a GPU"')
    for key in ("exit", "timeout"):
        if key in options and not options[key].isdigit():
            raise MarkerError(f"{where}: {key}={options[key]!r} is not a number")
    if not re.fullmatch(r"[a-z][a-z0-9-]*", options.get("name", "demo")):
        raise MarkerError(f"{where}: name={options['name']!r} is not a project name")
    if options.get("output", "full") != "full":
        raise MarkerError(f"{where}: output={options['output']!r}: the one value is output=full")
    if "driver" in options and not re.fullmatch(r"\d+(\.\d+)*", options["driver"]):
        raise MarkerError(f"{where}: driver={options['driver']!r} is not a driver version")
    return options


def examples(path: Path, shown_as: Path) -> list[Example]:
    """The shell examples of one Markdown file, each with its marker's options."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, indent = opened["fence"], len(opened["indent"])
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        lang = opened["info"].lower()
        if lang in SHELL:
            above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = _MARKER.match(above)
            where = f"{shown_as}:{i + 1}"
            options = parse_marker(marker["body"], where) if marker else {}
            body = "\n".join(line[indent:] for line in lines[i + 1 : end])
            found.append(Example(shown_as, i + 1, lang, body, options))
        i = end + 1
    return found


def indented_commands(path: Path, shown_as: Path) -> list[str]:
    """Shell commands in indented code blocks (outside fences): they would not be run."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, in_fence = [], False
    for n, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or n == 0 or lines[n - 1].strip():
            continue
        if re.match(r"^    (\$ )?(fdl|bash|python3?|pipx|pip|cd|docker) ", line):
            found.append(f"{shown_as}:{n + 1}: {line.strip()}")
    return found


def console_steps(example: Example) -> list[Step]:
    steps: list[Step] = []
    command: str | None = None
    start, shown = 0, []
    for offset, line in enumerate(example.text.splitlines(), start=1):
        if line.startswith("$ "):
            if command is not None:
                steps.append(Step(start, command, tuple(shown)))
            command, start, shown = line[2:], example.line + offset, []
        elif command is not None:
            shown.append(line)
    if command is not None:
        steps.append(Step(start, command, tuple(shown)))
    return steps


def _squash(line: str) -> str:
    return " ".join(line.split())


def _fits(shown: str, printed: str) -> bool:
    pieces = [re.escape(_squash(p)) for p in shown.split("...")]
    return re.fullmatch(r".*?".join(pieces), _squash(printed)) is not None


def missing_lines(shown: tuple[str, ...], printed: str) -> list[str]:
    """The shown lines not found among the printed ones, in order."""
    out = printed.splitlines()
    at, missing = 0, []
    for line in shown:
        if not line.strip() or line.strip() == "...":
            continue
        hit = next((k for k in range(at, len(out)) if _fits(line, out[k])), None)
        if hit is None:
            missing.append(line)
        else:
            at = hit + 1
    return missing


def normalized(printed: str, work: Path, home: Path) -> list[str]:
    """What a command printed as a page shows it: the example's directories by name, no
    trailing spaces or blank lines."""
    text = printed.replace(str(work), "~/work").replace(str(home), "~")
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def rewrite(example: Example, body: str, repo: Path) -> None:
    """Replace the example's text in its page (FDL_UPDATE_DOCS=1; run without xdist)."""
    page = repo / example.path
    text = page.read_text(encoding="utf-8")
    old = "```console\n" + example.text + "\n```"
    assert text.count(old) == 1, f"{example.where}: the example is not once in its page"
    page.write_text(text.replace(old, "```console\n" + body + "\n```"), encoding="utf-8")
