"""Minimal edits of the compat tables' YAML text: one line changed or one block added, the
comments and layout of the rest kept, so that the diff a maintainer reviews is only the
facts that moved (with the comment that gives their source)."""

from __future__ import annotations

import re

from fdl.errors import UsageError

__all__ = [
    "add_patch_release",
    "add_ptx_jit_row",
    "add_release",
    "add_toolkit",
    "comment_lines",
    "set_image_version",
    "set_python_min",
    "unified_diff",
]


def _entry_span(lines: list[str], section: str, version: str) -> tuple[int, int]:
    """The lines ``[start, end)`` of the list entry ``- version: "X"`` under the top-level
    ``section:`` (``releases``, ``toolkits``)."""
    try:
        top = lines.index(f"{section}:")
    except ValueError:
        raise UsageError(f"the table has no top-level {section}: section") from None
    head = re.compile(rf'^(\s*)- version: "{re.escape(version)}"\s*$')
    for at in range(top + 1, len(lines)):
        line = lines[at]
        if line and not line[0].isspace() and not line.startswith("#"):
            break
        match = head.match(line)
        if match is None:
            continue
        indent = len(match.group(1))
        end = at + 1
        while end < len(lines):
            text = lines[end]
            stripped = text.lstrip()
            if text and not text[0].isspace() and not text.startswith("#"):
                break
            if stripped.startswith("- ") and len(text) - len(stripped) == indent:
                break
            end += 1
        while end > at + 1 and lines[end - 1].lstrip().startswith("#"):
            end -= 1  # a comment just before the next entry is that entry's
        return at, end
    raise UsageError(f"{section}: no entry for version {version}")


def comment_lines(indent: str, text: str, width: int = 96) -> list[str]:
    """``text`` as ``# ...`` lines at ``indent``, wrapped."""
    out: list[str] = []
    line = ""
    for word in text.split():
        if line and len(indent) + 2 + len(line) + 1 + len(word) > width:
            out.append(f"{indent}# {line}")
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(f"{indent}# {line}")
    return out


def _set_in_entry(
    text: str,
    section: str,
    version: str,
    key_line: str,
    pattern: str,
    value: str,
    note: str,
) -> str:
    """Set the value ``pattern`` matches on the entry's ``key_line`` and put ``note`` above
    it; the comment block right above that line goes when it was about the old value (it
    starts with ``# OLD:`` or ``# python_min``), so no stale source is left behind."""
    lines = text.split("\n")
    start, end = _entry_span(lines, section, version)
    compiled = re.compile(pattern)
    for at in range(start, end):
        found = compiled.search(lines[at]) if lines[at].lstrip().startswith(key_line) else None
        if found is None:
            continue
        old = found.group(0)[len(found.group(1)) : len(found.group(0)) - len(found.group(2))]
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines[at] = compiled.sub(lambda m: m.group(1) + value + m.group(2), lines[at], 1)
        top = at
        while top > start and lines[top - 1].lstrip().startswith("#"):
            top -= 1
        first = lines[top].strip() if top < at else ""
        markers = (f"# {old}:", f"# {old} ", "# python_min" if "python_min" in pattern else None)
        place = at
        if any(m and first.startswith(m) for m in markers):
            del lines[top:at]
            place = top
        lines[place:place] = comment_lines(indent, note)
        return "\n".join(lines)
    raise UsageError(f"{section} {version}: no {key_line} line to change")


def set_python_min(text: str, release: str, value: str, note: str) -> str:
    """``pytorch.yaml`` with release ``release``'s ``python_min`` set to ``value``."""
    return _set_in_entry(
        text, "releases", release, "source:", r'(python_min: ")[^"]*(")', value, note
    )


def set_image_version(text: str, cuda: str, value: str, note: str) -> str:
    """``cuda.yaml`` with toolkit ``cuda``'s ``image.version`` set to ``value``."""
    return _set_in_entry(text, "toolkits", cuda, "image:", r'(\{version: ")[^"]*(")', value, note)


def add_patch_release(text: str, release: str, patch: str) -> str:
    """``pytorch.yaml`` with ``patch`` added to release ``release``'s ``patches`` list."""
    lines = text.split("\n")
    start, end = _entry_span(lines, "releases", release)
    for at in range(start, end):
        match = re.match(r"^(\s*patches: \[)([^\]]*)(\].*)$", lines[at])
        if match:
            items = [p for p in re.findall(r'"([^"]+)"', match.group(2))]
            if patch not in items:
                items.append(patch)
            listed = ", ".join(f'"{p}"' for p in items)
            lines[at] = f"{match.group(1)}{listed}{match.group(3)}"
            return "\n".join(lines)
    raise UsageError(f"releases {release}: no patches line to change")


def _last_entry_end(lines: list[str], section: str) -> int:
    top = lines.index(f"{section}:")
    end = top + 1
    for at in range(top + 1, len(lines)):
        line = lines[at]
        if line and not line[0].isspace() and not line.startswith("#"):
            break
        if line.strip() and not line.lstrip().startswith("#"):
            end = at + 1
    return end


def add_release(text: str, block: list[str]) -> str:
    """``pytorch.yaml`` with a release entry (``block``, its lines) after the last one."""
    lines = text.split("\n")
    at = _last_entry_end(lines, "releases")
    lines[at:at] = block
    return "\n".join(lines)


def add_toolkit(text: str, block: list[str]) -> str:
    """``cuda.yaml`` with a toolkit entry (``block``) after the last one."""
    lines = text.split("\n")
    at = _last_entry_end(lines, "toolkits")
    lines[at:at] = block
    return "\n".join(lines)


def add_ptx_jit_row(text: str, cuda: str, note: str) -> str:
    """``cuda.yaml`` with a ``ptx_jit_driver`` row for ``cuda`` that says no source gave
    its driver (``min: null``: the newest older toolkit's floor applies)."""
    lines = text.split("\n")
    try:
        top = lines.index("ptx_jit_driver:")
    except ValueError:
        raise UsageError("cuda.yaml has no ptx_jit_driver: section") from None
    at = top + 1
    last = None
    while at < len(lines) and (not lines[at] or lines[at][0].isspace()):
        if re.match(r'^\s+"\d+\.\d+":', lines[at]):
            last = at
        at += 1
    if last is None:
        raise UsageError("cuda.yaml: ptx_jit_driver has no versions")
    indent = lines[last][: len(lines[last]) - len(lines[last].lstrip())]
    row = f'{indent}"{cuda}": {{min: null, verified: false, source: "{note}"}}'
    lines[last + 1 : last + 1] = [row]
    return "\n".join(lines)


def unified_diff(path: str, before: str, after: str) -> str:
    """A ``git apply``-able unified diff of one file (``a/PATH``, ``b/PATH``)."""
    import difflib

    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
    )
