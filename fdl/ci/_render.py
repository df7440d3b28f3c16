"""The matrix as files: the bake file, one Dockerfile (and .dockerignore) per cell and
per libtorch image, and the workflow (:mod:`fdl.ci._workflow`).

Output depends only on the matrix: no timestamps, no host paths, fixed order.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from fdl.ci._matrix import Cell, Matrix, MatrixVariant, bake_path
from fdl.ci._text import comment_lines, hcl, header, render_template
from fdl.ci._workflow import render_workflow

__all__ = ["GeneratedFile", "bake_path", "dockerfiles_dir", "generated_files", "render_bake"]


@dataclass(frozen=True)
class GeneratedFile:
    """A file ``fdl ci generate`` writes.

    Attributes:
        path: Where, relative to the repository root (POSIX).
        text: Its contents.
    """

    path: str
    text: str


def _in_repo(matrix: Matrix, path: str) -> str:
    """A project-relative path as a repository-relative one."""
    return posixpath.normpath(posixpath.join(matrix.config.working_directory, path))


def generated_files(matrix: Matrix) -> list[GeneratedFile]:
    """Every file of the matrix, sorted by path."""

    files = [
        GeneratedFile(_in_repo(matrix, bake_path(matrix)), render_bake(matrix)),
        GeneratedFile(matrix.config.workflow, render_workflow(matrix)),
    ]
    files += [
        GeneratedFile(_in_repo(matrix, path), text) for path, text in _dockerfiles(matrix).items()
    ]
    return sorted(files, key=lambda item: item.path)


def dockerfiles_dir(matrix: Matrix) -> str:
    """The directory of the generated Dockerfiles, relative to the repository root
    (``fdl ci generate`` owns it: files there that the matrix no longer makes are stale)."""
    return _in_repo(matrix, f"{matrix.config.output}/dockerfiles")


def _comment(matrix: Matrix, text: str) -> str:
    return f"# {header(matrix.config)}\n{text}"


def _dockerfiles(matrix: Matrix) -> dict[str, str]:
    from fdl.images import render_dockerfile, render_dockerignore, render_libtorch_dockerfile

    files: dict[str, str] = {}
    for variant in matrix.variants:
        if any(cell.needs for cell in matrix.cells_of(variant)):
            text = render_libtorch_dockerfile(
                variant.ref, matrix.fdl_version, pushed=variant.pushed
            )
            files[variant.dockerfile] = _comment(matrix, text)
    for cell in matrix.cells:
        files[cell.dockerfile] = _comment(
            matrix, render_dockerfile(cell.spec, regenerate="fdl ci generate")
        )
        # BuildKit reads <Dockerfile>.dockerignore before the context's own: the
        # variant installed in the project by CI never reaches the daemon.
        ignore = render_dockerignore([cell.spec])
        files[f"{cell.dockerfile}.dockerignore"] = _comment(matrix, ignore)
    return files


def render_bake(matrix: Matrix) -> str:
    """The ``docker-bake.hcl`` of the matrix."""
    cells = matrix.cells
    groups = [{"name": hcl("default"), "targets": [hcl(cell.id) for cell in cells]}]
    for variant in matrix.variants:
        groups.append(
            {
                "name": hcl(variant.slug),
                "targets": [hcl(cell.id) for cell in matrix.cells_of(variant)],
            }
        )
    needed = {target for cell in cells for target in cell.needs}
    targets = [_libtorch_target(v) for v in matrix.variants if v.target in needed]
    targets += [_cell_target(matrix, cell) for cell in cells]
    profiles = ", ".join(dict.fromkeys(cell.profile for cell in cells))
    variants = ", ".join(variant.slug for variant in matrix.variants)
    intro = (
        f"fdl {matrix.fdl_version}: the image matrix of {matrix.config.project}, "
        f"{len(cells)} cells (profiles {profiles} x libtorch variants {variants})."
    )
    return render_template(
        "docker-bake.hcl.j2",
        header=header(matrix.config),
        intro=comment_lines(intro),
        run_from=_run_from(matrix),
        bake_file=bake_path(matrix),
        groups=groups,
        targets=targets,
    )


def _run_from(matrix: Matrix) -> str:
    directory = matrix.config.working_directory
    return "the repository root" if directory == "." else f"{directory}/"


def _aligned(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    width = max((len(key) for key, _ in pairs), default=0)
    return [(key.ljust(width), value) for key, value in pairs]


def _list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(hcl(value) for value in values) + "]"


def _relative(path: str, start: str) -> str:
    """bake resolves a target's Dockerfile relative to its context."""
    return posixpath.relpath(path, start)


def _libtorch_target(variant: MatrixVariant) -> dict[str, Any]:
    return {
        "name": hcl(variant.target),
        "head": _aligned(
            [
                ("context", hcl(variant.context)),
                ("dockerfile", hcl(_relative(variant.dockerfile, variant.context))),
            ]
        ),
        "maps": [],
        "tail": [],
    }


def _cell_target(matrix: Matrix, cell: Cell) -> dict[str, Any]:
    head = [
        ("context", hcl(cell.context)),
        ("dockerfile", hcl(_relative(cell.dockerfile, cell.context))),
    ]
    maps: list[tuple[str, list[tuple[str, str]]]] = []
    if cell.needs:
        image = dict(cell.args)["LIBTORCH_IMAGE"]
        maps.append(("contexts", [(hcl(image), hcl(f"target:{cell.needs[0]}"))]))
    maps.append(("args", _aligned([(name, hcl(value)) for name, value in cell.args])))
    tail = [
        ("tags", _list([cell.tag])),
        ("platforms", _list(matrix.config.platforms)),
    ]
    if cell.secrets:
        tail.append(("secret", _list(cell.secrets)))
    if cell.cache_from:
        tail.append(("cache-from", _list(cell.cache_from)))
        tail.append(("cache-to", f'CACHE_EXPORT == "1" ? {_list(cell.cache_to)} : []'))
    tail.append(("output", _list(["type=docker"])))
    return {"name": hcl(cell.id), "head": _aligned(head), "maps": maps, "tail": _aligned(tail)}
