"""``fdl init`` as one call: answers, plan, write."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fdl._files import atomic_write_text, existing_mode
from fdl.errors import UsageError
from fdl.scaffold._answers import make_answers
from fdl.scaffold._merge import merge3
from fdl.scaffold._plan import OVERLAY, READ_BY_IMAGES, plan_project
from fdl.scaffold._project_files import (
    GENERATED,
    USER,
    Answers,
    FileResult,
    FileSpec,
    WriteReport,
)
from fdl.scaffold._write import (
    check_target,
    check_template,
    outside,
    read_existing,
    write_project,
    written_by_fdl,
)

__all__ = ["ADDABLE", "BASE_DIR", "add_to_project", "init_project", "record_base", "update_project"]


def init_project(
    directory: Path,
    given: Mapping[str, Any],
    recorded: Mapping[str, Any],
    *,
    force: bool = False,
    dry_run: bool = False,
) -> tuple[Answers, WriteReport]:
    """Create (or complete) the project in ``directory``.

    Args:
        directory: The project directory; its name is the project's.
        given: The answers given now (``template``, ``mode``, ``torch``, ``example``;
            None: not given).
        recorded: The answers of an earlier run (:func:`read_answers`).
        force: Write into a non-empty directory; overwrite the files fdl generates.
        dry_run: Decide everything, write nothing.

    Raises:
        UsageError: a name the template refuses, a non-empty directory without ``force``.
    """
    answers = make_answers(directory.name, dict(given), dict(recorded))
    check_template(directory, answers.template, recorded.get("template"))
    check_target(directory, force=force)
    existing = read_existing(directory, [answers.manifest_file, OVERLAY, *READ_BY_IMAGES])
    files = plan_project(answers, existing=existing, ci_files=_repository_root(directory))
    report = write_project(directory, files, force=force, dry_run=dry_run)
    if not dry_run:
        record_base(directory, files, report.results)
    return answers, report


def _repository_root(directory: Path) -> bool:
    """True when ``directory`` is (or will be) its repository's root: not inside another
    git repository, where `fdl ci generate` writes at that repository's root."""
    from fdl.ci import repository_root

    return repository_root(directory) == directory.resolve()


# What fdl wrote last time for each of the user's files: the base of the next
# `fdl init --update` (committed with the project, so every clone can update).
BASE_DIR = ".fdl/template"


def _plain(directory: Path, relative: str) -> bool:
    """True when ``directory/relative`` is reached without following a symbolic link
    (fdl writes or deletes nothing through one: it could lead out of the project) and
    through directories only (a file or FIFO where a directory of the template goes is
    the user's: left alone)."""
    path = directory
    parts = Path(relative).parts
    for index, part in enumerate(parts):
        if part in ("..", "/"):
            return False
        path = path / part
        if path.is_symlink():
            return False
        if index < len(parts) - 1 and path.exists() and not path.is_dir():
            return False
    return True


def record_base(directory: Path, files: Sequence[FileSpec], results: Sequence[FileResult]) -> None:
    """Keep the template's text of each user file the project holds as fdl wrote it."""
    written = {r.path for r in results if r.action in ("created", "unchanged")}
    for spec in files:
        relative = f"{BASE_DIR}/{spec.path}"
        if spec.kind == USER and spec.path in written and _plain(directory, relative):
            atomic_write_text(directory / relative, spec.content)


def _read(path: Path) -> str | None:
    if path.is_symlink() or not path.is_file():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def _diff(path: str, before: str | None, after: str | None) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            f"a/{path}" if before is not None else "/dev/null",
            f"b/{path}" if after is not None else "/dev/null",
        )
    )


def _merge_user_file(
    directory: Path, spec: FileSpec, template_label: str
) -> tuple[FileResult, str | None]:
    """One user file: (what happens, the text to write or None)."""
    target = directory / spec.path
    if not _plain(directory, spec.path) or (target.exists() and not target.is_file()):
        return (
            FileResult(
                spec.path,
                "skipped",
                USER,
                "a symbolic link, not a file, or inside something that is not a directory: left alone",
            ),
            None,
        )
    current = _read(target)
    base = _read(directory / BASE_DIR / spec.path)
    if current is None:
        if base is not None:  # fdl wrote it, you deleted it: stays deleted
            return FileResult(spec.path, "skipped", USER, "you deleted it; it stays deleted"), None
        return FileResult(spec.path, "created", USER, diff=_diff(spec.path, None, spec.content)), (
            spec.content
        )
    if current == spec.content:
        return FileResult(spec.path, "unchanged", USER), None
    if base is None:
        return (
            FileResult(
                spec.path,
                "skipped",
                USER,
                "no record of what fdl wrote (a project of an older fdl): yours is kept; "
                "compare with `fdl init --update --dry-run`",
                diff=_diff(spec.path, current, spec.content),
            ),
            None,
        )
    if base == spec.content:
        return FileResult(spec.path, "kept", USER), None
    merged = merge3(base, current, spec.content, labels=("yours", "base", template_label))
    if merged.text == current:
        return FileResult(spec.path, "kept", USER), None
    action = "conflict" if merged.conflicts else ("updated" if current == base else "merged")
    reason = (
        f"{merged.conflicts} conflicting hunk(s): resolve the markers" if merged.conflicts else None
    )
    return (
        FileResult(spec.path, action, USER, reason, diff=_diff(spec.path, current, merged.text)),
        merged.text,
    )


def update_project(
    directory: Path, given: Mapping[str, Any], recorded: Mapping[str, Any], *, dry_run: bool = False
) -> tuple[Answers, WriteReport]:
    """Apply the current template to a project made by an older one: a three-way merge of
    each of the user's files between what fdl wrote last time (``.fdl/template/``), the
    file as it is, and what the template writes now; the files fdl generates are written
    again from the merged manifest. Nothing of the user's is lost: a conflict is marked in
    the file as git marks it, a file the template dropped is deleted only when unchanged.

    Raises:
        UsageError: ``directory`` is not a project made by ``fdl init``.
    """
    from fdl.scaffold._answers import answers_path
    from fdl.scaffold._templates import template

    if not recorded:
        raise UsageError(
            f"{directory} is not a project made by `fdl init` (no {answers_path(directory).name})",
            hint=f"create one with `fdl init {directory.name}`",
        )
    # The project keeps the name it was made with: a renamed directory (a clone under
    # another name) does not rename the CMake project or the crate.
    answers = make_answers(str(recorded.get("name") or directory.name), dict(given), dict(recorded))
    check_template(directory, answers.template, recorded.get("template"))
    if not _plain(directory, BASE_DIR):
        raise UsageError(
            f"{directory / BASE_DIR} is reached through a symbolic link: fdl does not merge "
            "or write through one",
            hint="replace the link with the directory itself (mv) and run again",
        )
    chosen = template(answers.template)
    label = f"template {chosen.name} v{chosen.version}"
    ci_files = _repository_root(directory)
    pristine = plan_project(answers, ci_files=ci_files)
    results: list[FileResult] = []
    writes: dict[str, str] = {}
    merged_texts: dict[str, str] = {}
    for spec in pristine:
        if spec.kind != USER:
            continue
        result, text = _merge_user_file(directory, spec, label)
        results.append(result)
        if text is not None:
            writes[spec.path] = text
        current = text if text is not None else _read(directory / spec.path)
        if current is not None:
            merged_texts[spec.path] = current
    planned = {spec.path for spec in pristine}
    base_root = directory / BASE_DIR
    if base_root.is_dir():
        for old in sorted(p for p in base_root.rglob("*") if p.is_file()):
            relative = old.relative_to(base_root).as_posix()
            if relative in planned:
                continue
            if not _plain(directory, relative):
                continue
            current = _read(directory / relative)
            if current is not None and current == _read(old):
                results.append(
                    FileResult(
                        relative,
                        "deleted",
                        USER,
                        "the template dropped it",
                        diff=_diff(relative, current, None),
                    )
                )
            elif current is not None:
                results.append(
                    FileResult(
                        relative,
                        "kept",
                        USER,
                        "the template dropped it; yours differs from what fdl wrote, so it stays",
                    )
                )
    generated = _generated(directory, answers, merged_texts, results, ci_files=ci_files)
    report_results = sorted([*results, *generated[0]], key=lambda r: r.path)
    if not dry_run:
        for path, text in writes.items():
            mode = next((s.mode for s in pristine if s.path == path), 0o644)
            atomic_write_text(directory / path, text, mode=existing_mode(directory / path, mode))
        for result in results:
            if result.action == "deleted":
                (directory / result.path).unlink()
                (base_root / result.path).unlink()
        for spec in generated[1]:
            target = directory / spec.path
            atomic_write_text(target, spec.content, mode=existing_mode(target, spec.mode))
        for spec in pristine:
            if spec.kind == USER and (directory / spec.path).is_file():
                atomic_write_text(base_root / spec.path, spec.content)
    return answers, WriteReport(directory, tuple(report_results), dry_run=dry_run)


_PLANNED_FROM = ("fdl.yml", "fdl.yml.example", OVERLAY, *READ_BY_IMAGES)


def _generated(
    directory: Path,
    answers: Answers,
    merged: Mapping[str, str],
    results: Sequence[FileResult],
    *,
    ci_files: bool = True,
) -> tuple[list[FileResult], list[FileSpec]]:
    """The files fdl generates, planned from the merged manifest: (results, to write)."""
    from fdl.errors import FdlError

    blocked = [r.path for r in results if r.action == "conflict" and r.path in _PLANNED_FROM]
    existing = {name: text for name, text in merged.items() if name in _PLANNED_FROM}
    try:
        files = [] if blocked else plan_project(answers, existing=existing, ci_files=ci_files)
    except FdlError as exc:
        blocked = [f"{answers.manifest_file} ({exc.message})"]
        files = []
    if blocked:
        why = f"resolve the conflicts in {', '.join(blocked)}, then run `fdl init . --force`"
        planned = plan_project(answers, ci_files=ci_files)
        names = sorted({s.path for s in planned if s.kind == GENERATED})
        return [FileResult(n, "skipped", GENERATED, why) for n in names], []
    out: list[FileResult] = []
    writes: list[FileSpec] = []
    for spec in files:
        if spec.kind != GENERATED:
            continue
        target = directory / spec.path
        escape = outside(directory, spec.path)
        if escape or target.is_symlink() or (target.exists() and not target.is_file()):
            why = (
                escape
                or "a symbolic link, not a file, or inside something that is not a directory: left alone"
            )
            out.append(FileResult(spec.path, "skipped", GENERATED, why))
            continue
        current = _read(target)
        if (
            current is not None
            and current != spec.content
            and not written_by_fdl(target, spec.path)
        ):
            why = "yours: fdl did not write it (no fdl header); move it aside to get fdl's"
            out.append(FileResult(spec.path, "skipped", GENERATED, why))
            continue
        if current == spec.content:
            out.append(FileResult(spec.path, "unchanged", GENERATED))
            continue
        action = "created" if current is None else "overwritten"
        out.append(
            FileResult(spec.path, action, GENERATED, diff=_diff(spec.path, current, spec.content))
        )
        writes.append(spec)
    return out, writes


# `fdl add TARGET`: the optional parts of a template -> (its template, the answer that
# turns it on). floDl's own CLI accepts `hf` for flodl-hf too.
ADDABLE = {"flodl-hf": ("flodl", "hf"), "hf": ("flodl", "hf")}


def add_to_project(
    directory: Path, target: str, recorded: Mapping[str, Any], *, dry_run: bool = False
) -> tuple[Answers, WriteReport]:
    """Add an optional part of the template to a project ``fdl init`` made: the answer
    that turns it on, recorded, and :func:`update_project` (the part's files created,
    the manifest three-way merged, so that nothing of the user's is lost).

    Raises:
        UsageError: an unknown target, not a project of ``fdl init``, or a project of
            another template.
    """
    if target not in ADDABLE:
        raise UsageError(
            f"unknown target {target!r}",
            hint="targets: flodl-hf (floDl's HuggingFace playground, in flodl-hf/)",
        )
    wanted, answer = ADDABLE[target]
    if not recorded:
        from fdl.scaffold._answers import answers_path

        raise UsageError(
            f"{directory} is not a project made by `fdl init` (no "
            f"{answers_path(directory).name}): fdl add extends such a project",
            hint=f"create one with it: `fdl init NAME --template {wanted} --with-{answer}`",
        )
    if recorded.get("template") != wanted:
        raise UsageError(
            f"{target} is a part of the {wanted} template; {directory.name} is a "
            f"{recorded.get('template')} project",
            hint=f"create a {wanted} project: `fdl init NAME --template {wanted} --with-{answer}`",
        )
    from fdl.scaffold._answers import project_flodl_release

    # flodl-hf is pinned to the project's own floDl release (as floDl's `fdl add` does),
    # not to the one the template wrote when the project was made
    given: dict[str, Any] = {answer: True}
    release = project_flodl_release(directory)
    if release is not None:
        given["flodl"] = release
    return update_project(directory, given, recorded, dry_run=dry_run)
