"""The files and commands of floDl's ``fdl init`` beside fdl's ``fdl init --template flodl``,
as Markdown tables (docs/reference-parity.md, "Scaffold", kept true by
tests/integration/test_reference_scaffold.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["COUNTERPARTS", "MODES", "scaffold_tables"]

# floDl's mode (its flag) -> fdl's --mode
MODES = {
    "mounted": ("", "mounted"),
    "docker": ("--docker", "baked"),
    "native": ("--native", "native"),
}
# A file of floDl's scaffold -> the file of fdl's that does its job (same name otherwise)
COUNTERPARTS = {
    "fdl.yml.example": "fdl.yml",
    "Dockerfile": "docker/dev.Dockerfile",
    "Dockerfile.cpu": "docker/dev.Dockerfile",
    "Dockerfile.cuda": "docker/cuda.Dockerfile",
}
# What a file of only one side is for
PURPOSE = {
    "fdl": "floDl: a bootstrap script that downloads floDl's CLI (`./fdl setup`)",
    ".dockerignore": "keeps the build context small",
    ".env.example": "compose's local overrides (floDl's own since 0.7.0)",
    ".fdl-answers.yml": "the template, its version and the answers (`fdl init --update`)",
    ".fdl/fdl.schema.json": "the manifest's JSON Schema for editors",
    ".fdl/template/": "what fdl wrote, the base of `fdl init --update`'s three-way merge",
    ".github/workflows/ci.yml": "CI: build, test, a short training run",
    ".github/workflows/fdl-images.yml": "CI: the image matrix (`fdl ci generate`)",
    ".vscode/settings.json": "fdl's YAML tags for the YAML extension",
    "README.md": "how to build, test and train the project",
    "ci/": "what `fdl ci generate` writes for the `ci:` section",
    "docker/rocm.Dockerfile": "the rocm service, AMD GPUs (floDl's own since 0.8.0)",
    "docker/train.Dockerfile": "the slim training image (`fdl image build train`)",
    "fdl.ci.yml": "the CI overlay (CPU, a short run)",
    "rust-toolchain.toml": "the Rust toolchain, pinned (images install the same)",
}


def _files(project: Path) -> list[str]:
    """The project's files, ``.fdl/template/`` and ``ci/`` folded into one row each."""
    found = set()
    for path in project.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(project).as_posix()
        for folder in (".fdl/template/", "ci/"):
            if relative.startswith(folder):
                relative = folder
        found.add(relative)
    return sorted(found)


def _mark(present: bool, name: str, other: str) -> str:
    if not present:
        return "—"
    return f"✓ (`{name}`)" if name != other else "✓"


def _file_table(ref: Path, ours: Path) -> list[str]:
    theirs, mine = _files(ref), set(_files(ours))
    rows = [
        "| file | floDl's `fdl init` | fdl's `fdl init` | what it is for |",
        "|---|---|---|---|",
    ]
    matched: set[str] = set()
    for name in theirs:
        counterpart = COUNTERPARTS.get(name, name)
        have = counterpart in mine
        matched.add(counterpart if have else "")
        note = PURPOSE.get(name, "") if not have else ""
        rows.append(f"| `{name}` | ✓ | {_mark(have, counterpart, name)} | {note} |")
    for name in sorted(mine - matched):
        rows.append(f"| `{name}` | — | ✓ | {PURPOSE.get(name, '')} |")
    return rows


def _commands(manifest: Path) -> dict[str, dict[str, str]]:
    data = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
    return {name: spec or {} for name, spec in (data.get("commands") or {}).items()}


def _shown(spec: dict[str, str] | None) -> str:
    if spec is None:
        return "—"
    text = spec.get("run", "")
    if spec.get("append"):
        text += f"` + append `{spec['append']}"
    service = f" ({spec['docker']})" if spec.get("docker") else ""
    return f"`{text}`{service}"


def _command_table(ref: Path, ours: Path) -> list[str]:
    theirs = _commands(ref / "fdl.yml.example")
    mine = _commands(ours / "fdl.yml")
    rows = ["| command | floDl's (service) | fdl's (service) |", "|---|---|---|"]
    for name in [*theirs, *(n for n in mine if n not in theirs)]:
        rows.append(f"| `{name}` | {_shown(theirs.get(name))} | {_shown(mine.get(name))} |")
    return rows


def scaffold_tables(ref: dict[str, Path], ours: dict[str, Path]) -> str:
    """The Markdown of both scaffolds, mode by mode (``ref`` and ``ours`` keyed by floDl's
    mode names, as :data:`MODES`)."""
    lines: list[str] = []
    for mode, (flag, our_mode) in MODES.items():
        command = f"fdl init NAME {flag}".strip()
        lines += [
            f"#### `{command}` (floDl) and `fdl init NAME --template flodl --mode {our_mode}`",
            "",
            *_file_table(ref[mode], ours[mode]),
            "",
            *_command_table(ref[mode], ours[mode]),
            "",
        ]
    return "\n".join(lines)
