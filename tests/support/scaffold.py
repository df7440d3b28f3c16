"""Helpers for the `fdl init` tests: plan every template and mode, read what they plan."""

from __future__ import annotations

from pathlib import Path

from fdl.scaffold import Answers, FileSpec, make_answers, plan_project

VERSION = "0.0.0+test"
TORCH = "2.13.0"
CASES = [
    (template, mode)
    for template in ("cpp", "flodl", "tch")
    for mode in ("mounted", "baked", "native")
]


def answers(template: str, mode: str, name: str = "demo", **more: object) -> Answers:
    """Answers for ``template`` and ``mode`` (torch 2.13.0, the local wheel's, where the
    template leaves torch free; the flodl and tch templates pin their framework release's)."""
    torch = {} if template in ("flodl", "tch") else {"torch": TORCH}
    return make_answers(name, {"template": template, "mode": mode, **torch, **more}, {})


def planned(template: str, mode: str, name: str = "demo", **more: object) -> dict[str, FileSpec]:
    """The planned files by path, with a fixed fdl version."""
    files = plan_project(answers(template, mode, name, **more), fdl_version=VERSION)
    return {spec.path: spec for spec in files}


def write_files(root: Path, files: dict[str, FileSpec]) -> Path:
    """Write planned files under ``root`` (as the writer would, without its checks)."""
    for spec in files.values():
        target = root / spec.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(spec.content, encoding="utf-8")
    return root
